import type { Card, CardAttachment } from '../bot/chat-adapter.js';
import { definedOnly } from '../defined-only.js';
import { RUN_FILES } from '../runs/records/run-files.js';
import { codeBlock } from '../text/code-block.js';
import { redactSecrets } from '../text/redact.js';
import { editOnCard, isEditable } from './approval-edits.js';
import type { Approval, Decision } from './approval-store.js';

/** Longest script excerpt a card shows; the rest is cut with a note (platform limits are far above it). */
const EXCERPT_LIMIT = 2500;
/** A script or diff up to this many lines (and `WHOLE_CHARS`) is shown whole on the card. */
const WHOLE_LINES = 40;
const WHOLE_CHARS = 3500;
/** A longer one shows its start; the whole file is attached. */
const HEAD_LINES = 25;

/**
 * The card's buttons (`approve:<approvalId>`, `reject:<approvalId>`, `edit:<approvalId>`); the action router
 * keys on these. Edit opens a form (approval-edits.ts) whose submission approves with the edits.
 */
export const APPROVAL_ACTIONS = { approve: 'approve', reject: 'reject', edit: 'edit' } as const;

const KIND_TITLE: Record<Approval['kind'], string> = {
  start: 'Approve training run',
  resume: 'Approve resuming run',
  'script-change': 'Approve script change',
  sweep: 'Approve sweep',
  schedule: 'Approve recurring job',
};

export function formatUsd(value: number): string {
  return `$${value % 1 === 0 ? value.toFixed(0) : value.toFixed(2)}`;
}

function formatClock(isoTime: string): string {
  return `${isoTime.slice(11, 16)} UTC`;
}

/** Cuts a long diff or script at a line boundary with a note saying how much was left out. */
function cutExcerpt(text: string, limit = EXCERPT_LIMIT): string {
  if (text.length <= limit) return text;
  const cut = text.lastIndexOf('\n', limit);
  const kept = text.slice(0, cut > limit / 2 ? cut : limit);
  const omittedLines = text.slice(kept.length).split('\n').length;
  return `${kept}\n… (${omittedLines} more lines not shown)`;
}

/**
 * Approvers see what they approve: the whole script or diff when it is short, otherwise its start with
 * the whole file attached. Redacted before any cut, so a cut never keeps a secret's tail.
 */
function scriptOnCard(approval: Pick<Approval, 'kind' | 'runId' | 'scriptExcerpt'>): {
  excerpt: string;
  note: string;
  attachment?: CardAttachment;
} {
  const text = redactSecrets(approval.scriptExcerpt).replace(/\n$/, '');
  const lines = text.split('\n');
  if (lines.length <= WHOLE_LINES && text.length <= WHOLE_CHARS) return { excerpt: text, note: '' };
  const filename =
    approval.kind === 'script-change' ? `${approval.runId}.diff` : `${approval.runId}-train.py`;
  const head = cutExcerpt(lines.slice(0, HEAD_LINES).join('\n'));
  const shownLines = head.split('\n').length;
  return {
    excerpt: `${head}\n… ${lines.length - Math.min(shownLines, HEAD_LINES)} more lines in ${filename}`,
    note: ` (first lines of ${lines.length}; the whole file is attached as ${filename})`,
    attachment: { filename, text: `${text}\n` },
  };
}

export function approvalCard(approval: Approval): Card {
  const sweep = approval.trials !== undefined;
  const fields = [
    { label: 'Requested by', value: approval.requester.name },
    { label: sweep ? 'Sweep' : 'Run', value: approval.runName },
    ...(sweep ? [{ label: 'Trials', value: String(approval.trials) }] : []),
    { label: sweep ? 'GPUs per trial' : 'GPUs', value: String(approval.gpus) },
    { label: sweep ? 'Max hours per trial' : 'Max hours', value: String(approval.maxHours) },
    { label: sweep ? 'Est. total cost' : 'Est. cost', value: formatUsd(approval.costUsd) },
  ];
  if (approval.backend !== undefined) fields.push({ label: 'Runs on', value: approval.backend });
  if (approval.schedule !== undefined)
    fields.push({ label: 'Schedule (cron, UTC)', value: approval.schedule });
  if (approval.environment !== undefined) fields.push({ label: 'Environment', value: approval.environment });
  if (approval.memory !== undefined) fields.push({ label: 'Memory estimate', value: approval.memory });
  const lines: string[] = [];
  if (approval.budget !== undefined) {
    const { limitUsd, leftUsd } = approval.budget;
    fields.push({
      label: 'Budget left',
      value: `${formatUsd(leftUsd)} of ${formatUsd(limitUsd)} this month`,
    });
    if (approval.costUsd > leftUsd)
      lines.push(`⚠️ This job would pass the monthly budget, so it needs an approver.`);
  }
  if (approval.reason !== undefined)
    lines.push(approval.kind === 'sweep' ? approval.reason : `Reason: ${approval.reason}`);
  if (approval.changes !== undefined) {
    lines.push(
      approval.changes.length === 0
        ? 'Configuration: unchanged from the parent run.'
        : `Configuration changes from the parent run:\n${codeBlock(redactSecrets(approval.changes.join('\n')))}`,
    );
  }
  if (approval.datasetCheck !== undefined) lines.push(`Dataset check: ${approval.datasetCheck}`);
  if (approval.command !== undefined) lines.push(`Command:\n${codeBlock(redactSecrets(approval.command))}`);
  for (const warning of approval.warnings ?? []) lines.push(`⚠️ ${warning}`);
  if (approval.basedOn !== undefined) lines.push(`Based on: ${approval.basedOn.slice(0, 5).join(', ')}`);
  // A failed pre-flight is shown, not enforced: a GPU-only script may not run on a CPU.
  if (approval.preflight !== undefined) lines.push(approval.preflight);
  const label =
    approval.kind === 'script-change'
      ? 'Script diff'
      : approval.command !== undefined
        ? 'Script'
        : approval.kind === 'start' || approval.kind === 'sweep'
          ? RUN_FILES.script
          : 'Script';
  let attachment: CardAttachment | undefined;
  if (approval.scriptExcerpt.trim() !== '') {
    const shown = scriptOnCard(approval);
    lines.push(`${label}${shown.note}:\n${codeBlock(shown.excerpt)}`);
    attachment = shown.attachment;
  }
  return {
    title: `${KIND_TITLE[approval.kind]}: ${approval.runName}`,
    text: lines.join('\n'),
    ...definedOnly({ attachment }),
    fields,
    actions: [
      { actionId: `${APPROVAL_ACTIONS.approve}:${approval.id}`, label: 'Approve', style: 'primary' },
      { actionId: `${APPROVAL_ACTIONS.reject}:${approval.id}`, label: 'Reject', style: 'danger' },
      ...(isEditable(approval)
        ? [{ actionId: `${APPROVAL_ACTIONS.edit}:${approval.id}`, label: 'Edit', style: 'default' as const }]
        : []),
    ],
  };
}

function decisionLine(decision: Decision): string {
  switch (decision.decision) {
    case 'approved':
      return decision.auto
        ? `Auto-approved at ${formatClock(decision.at)}${decision.note ? ` (${decision.note})` : ''}`
        : `Approved by ${decision.user.name}${decision.edits === undefined ? '' : ' with edits'} at ${formatClock(decision.at)}`;
    case 'rejected':
      return `Rejected by ${decision.user.name} at ${formatClock(decision.at)}${decision.note ? `: ${decision.note}` : ''}`;
    case 'expired':
      return `Expired at ${formatClock(decision.at)} without a decision`;
  }
}

/** The card after a decision: same content, the buttons replaced by the outcome line. */
export function resolvedApprovalCard(approval: Approval, decision: Decision): Card {
  const { actions: _actions, ...card } = approvalCard(approval);
  if (decision.edits === undefined) return { ...card, resolved: decisionLine(decision) };
  const edits = editOnCard(decision.edits, (text) => cutExcerpt(text));
  return {
    ...card,
    text: card.text === '' ? edits : `${card.text}\n${edits}`,
    resolved: decisionLine(decision),
  };
}
