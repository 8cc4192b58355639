import type { App } from '@slack/bolt';
import { z } from 'zod';
import type { Logger } from '../../logger.js';
import type { CardForm, ChatUser, InboundAction, InboundHandlers } from '../chat-adapter.js';

/**
 * A card button's form as a Slack modal: `views.open` with the click's trigger id, one `input` block per
 * field (block id = field id, a `plain_text_input` whose action id is `value`); the `view_submission`
 * comes back under FORM_CALLBACK_ID with the clicked card in `private_metadata` (which Slack keeps on
 * its side, so the submitter cannot change it), and goes to the core as the same action with `values`.
 * Shapes: Slack's modal view object and view_submission payload (docs.slack.dev reference/surfaces/views,
 * reference/interaction-payloads/view-interactions-payload; bolt-js `ViewSubmitAction`).
 */

const FORM_CALLBACK_ID = 'shepherd_card_form';
/** Slack's limits: a modal title and its buttons 24 characters, an input 3000 (its initial value too). */
const TITLE_MAX = 24;
const INPUT_MAX = 3000;

const metadataSchema = z.object({ threadId: z.string(), messageId: z.string(), actionId: z.string() });

const submissionSchema = z.object({
  type: z.literal('view_submission'),
  user: z.object({ id: z.string().min(1) }),
  view: z.object({
    callback_id: z.string(),
    private_metadata: z.string(),
    state: z.object({
      values: z.record(
        z.string(),
        z.record(z.string(), z.object({ value: z.string().nullable().optional() })),
      ),
    }),
  }),
});

/** The modal for `form` on the clicked card. */
export function formView(form: CardForm, action: Omit<InboundAction, 'user'>) {
  const plain = (text: string, max = TITLE_MAX) => ({
    type: 'plain_text' as const,
    text: text.slice(0, max),
  });
  return {
    type: 'modal' as const,
    callback_id: FORM_CALLBACK_ID,
    private_metadata: JSON.stringify({
      threadId: action.threadId,
      messageId: action.messageId,
      actionId: action.actionId,
    }),
    title: plain(form.title),
    submit: plain(form.submitLabel),
    close: plain('Cancel'),
    blocks: [
      ...(form.note === undefined
        ? []
        : [{ type: 'context' as const, elements: [{ type: 'plain_text' as const, text: form.note }] }]),
      ...form.fields.map((field) => {
        const maxLength = Math.min(field.maxLength, INPUT_MAX);
        const initial =
          field.initial !== undefined && field.initial.length <= maxLength ? field.initial : undefined;
        return {
          type: 'input' as const,
          block_id: field.id,
          optional: field.optional === true,
          label: plain(field.label, 2000),
          element: {
            type: 'plain_text_input' as const,
            action_id: 'value',
            multiline: field.multiline === true,
            max_length: maxLength,
            ...(initial === undefined ? {} : { initial_value: initial }),
          },
        };
      }),
    ],
  };
}

/** Listens for submissions of the forms `formView` opened and hands them to the core. */
export function registerFormSubmissions(
  target: App,
  handlers: InboundHandlers,
  dependencies: {
    logger: Logger;
    chatUser(userId: string): Promise<ChatUser>;
    postEphemeral(threadId: string, userId: string, text: string): Promise<void>;
  },
): void {
  const { logger } = dependencies;
  target.view(FORM_CALLBACK_ID, async ({ ack, body }) => {
    await ack();
    const parsed = submissionSchema.safeParse(body);
    const metadata = parsed.success
      ? metadataSchema.safeParse(safeJson(parsed.data.view.private_metadata))
      : undefined;
    if (!parsed.success || metadata === undefined || !metadata.success) {
      logger.warn('slack form submission ignored: not one of our forms');
      return;
    }
    const values: Record<string, string> = {};
    for (const [blockId, elements] of Object.entries(parsed.data.view.state.values))
      values[blockId] = elements.value?.value ?? '';
    const { threadId } = metadata.data;
    try {
      const outcome = await handlers.onAction({
        ...metadata.data,
        user: await dependencies.chatUser(parsed.data.user.id),
        values,
      });
      if (outcome.message !== undefined && outcome.message !== '')
        await dependencies.postEphemeral(threadId, parsed.data.user.id, outcome.message);
    } catch (error) {
      logger.error({ err: error, threadId }, 'slack form submission handling failed');
    }
  });
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
