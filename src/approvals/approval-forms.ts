import type { CardForm, InboundAction } from '../bot/chat-adapter.js';
import { redactSecrets } from '../text/redact.js';
import { type ApprovalPolicy, checkDecision } from './approval-policy.js';
import type { ApprovalStore } from './approval-store.js';

/**
 * The forms approval buttons open. Reject asks for an optional reason; the card then shows it and, for a
 * card the agent asked for, the agent reads it as its next turn's input. A form is only handed to someone
 * whose click would count, on a card still open: anyone else gets the usual refusal from the click.
 */

const REASON_FIELD = 'reason';
const REASON_MAX = 500;

function rejectForm(runName: string): CardForm {
  return {
    title: 'Reject',
    submitLabel: 'Reject',
    fields: [
      {
        id: REASON_FIELD,
        label: `Why reject ${runName}? (optional)`.slice(0, 45),
        multiline: true,
        optional: true,
        maxLength: REASON_MAX,
      },
    ],
  };
}

/** The reason a reject form carried: one line, trimmed, redacted, at most 500 characters. */
export function rejectReasonOf(action: InboundAction): string | undefined {
  const raw = action.values?.[REASON_FIELD];
  if (raw === undefined) return undefined;
  const reason = redactSecrets(raw.replace(/\s+/g, ' ').trim()).slice(0, REASON_MAX);
  return reason === '' ? undefined : reason;
}

/** `formFor` of the reject button: the reason form, or undefined when the click should go through as is. */
export function createRejectFormProvider(options: {
  store: ApprovalStore;
  policy: ApprovalPolicy;
  now: () => Date;
}) {
  return async (action: InboundAction, approvalId: string): Promise<CardForm | undefined> => {
    const approval = await options.store.get(approvalId);
    if (approval === undefined || (await options.store.getDecision(approvalId)) !== undefined)
      return undefined;
    if (options.now().getTime() >= Date.parse(approval.expiresAt)) return undefined;
    if (!checkDecision(options.policy, approval, action.user, 'rejected').allowed) return undefined;
    return rejectForm(approval.runName);
  };
}
