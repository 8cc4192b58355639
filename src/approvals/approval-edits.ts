import { createTwoFilesPatch } from 'diff';
import { type CardForm, decodeThreadId, type InboundAction, type Platform } from '../bot/chat-adapter.js';
import { codeBlock } from '../text/code-block.js';
import { redactSecrets } from '../text/redact.js';
import { type ApprovalPolicy, checkDecision } from './approval-policy.js';
import type { Approval, ApprovalStore, Decision } from './approval-store.js';

/**
 * Edit on an approval card: a form with the card's GPUs, hours, name and (start and script-change cards)
 * script, pre-filled; submitting it approves with the edits. A sweep's card edits GPUs and hours per trial
 * and the sweep's name; a recurring job's card edits its cron expression only. This file holds the form, the reading of its values (shape only: limits and names
 * are the run or sweep service's to check) and the edit's diff lines.
 */

const FIELDS = {
  gpus: 'gpus',
  hours: 'hours',
  name: 'name',
  script: 'script',
  schedule: 'schedule',
} as const;
/** The longest script a form field takes on each surface (Slack's initial value, Discord's text input). */
const SCRIPT_LIMIT: Record<Platform, number> = { slack: 3000, discord: 4000, web: 100_000 };

type EditableKind = 'start' | 'resume' | 'script-change' | 'sweep' | 'schedule';
type EditValues = NonNullable<Decision['edits']>['after'];
/** An edit as submitted, before the run service checked it. */
interface ProposedEdit {
  before: EditValues;
  after: Partial<EditValues>;
  /** The edited script, when it differs from the one on the card. */
  script?: string;
}

export function isEditable(approval: Approval): approval is Approval & { kind: EditableKind } {
  return (
    approval.kind === 'start' ||
    approval.kind === 'resume' ||
    approval.kind === 'script-change' ||
    approval.kind === 'sweep' ||
    approval.kind === 'schedule'
  );
}

/** GPUs only change where the run holds none: not on a script change (the run may be running). */
const editsGpus = (approval: Approval) => approval.kind !== 'script-change';

/** The script an edit starts from: a script change's proposal; a plain start's train.py; else none. */
async function scriptToEdit(
  approval: Approval,
  readScript: (runId: string) => Promise<string>,
): Promise<string | undefined> {
  if (approval.kind === 'script-change') return approval.proposedScript;
  if (approval.kind === 'start' && approval.command === undefined) return readScript(approval.runId);
  return undefined;
}

/** Why the script is not in the form, or undefined when it is. */
function scriptLeftOut(script: string | undefined, platform: Platform): string | undefined {
  if (script === undefined) return undefined;
  // The card shows the script redacted; a form must not hand out the secret it hides.
  if (redactSecrets(script) !== script)
    return 'The script holds a secret, so it is not in this form: edit the numbers here and change the script in the thread.';
  const limit = SCRIPT_LIMIT[platform];
  if (script.length > limit)
    return `The script (${script.length} characters) is longer than a form here takes (${limit}): edit the numbers here, and ask for a script change for the script.`;
  return undefined;
}

/** A recurring job's card: one field, the cron expression (the run it repeats is already decided). */
const scheduleForm = (approval: Approval): CardForm => ({
  title: 'Edit and approve',
  submitLabel: 'Approve',
  fields: [
    { id: FIELDS.schedule, label: 'Schedule (cron, UTC)', initial: approval.schedule ?? '', maxLength: 100 },
  ],
});

function editForm(approval: Approval, script: string | undefined, platform: Platform): CardForm {
  if (approval.kind === 'schedule') return scheduleForm(approval);
  const leftOut = scriptLeftOut(script, platform);
  const fields: CardForm['fields'] = [];
  const perTrial = approval.kind === 'sweep' ? ' per trial' : '';
  if (editsGpus(approval))
    fields.push({ id: FIELDS.gpus, label: `GPUs${perTrial}`, initial: String(approval.gpus), maxLength: 4 });
  fields.push(
    { id: FIELDS.hours, label: `Max hours${perTrial}`, initial: String(approval.maxHours), maxLength: 10 },
    {
      id: FIELDS.name,
      label: approval.kind === 'sweep' ? 'Sweep name' : 'Run name',
      initial: approval.runName,
      maxLength: 60,
    },
  );
  if (script !== undefined && leftOut === undefined)
    fields.push({
      id: FIELDS.script,
      label: approval.kind === 'script-change' ? 'Proposed script' : 'Script (train.py)',
      initial: script,
      multiline: true,
      maxLength: SCRIPT_LIMIT[platform],
    });
  return {
    title: leftOut === undefined ? 'Edit and approve' : 'Edit (numbers only)',
    submitLabel: 'Approve',
    fields,
    ...(leftOut === undefined ? {} : { note: leftOut }),
  };
}

/** `formFor` of the edit button: the form for whoever may approve this open card, else undefined. */
export function createEditFormProvider(options: {
  store: ApprovalStore;
  policy: ApprovalPolicy;
  now: () => Date;
  readScript(runId: string): Promise<string>;
}) {
  return async (action: InboundAction, approvalId: string): Promise<CardForm | undefined> => {
    const approval = await options.store.get(approvalId);
    if (approval === undefined || !isEditable(approval)) return undefined;
    if ((await options.store.getDecision(approvalId)) !== undefined) return undefined;
    if (options.now().getTime() >= Date.parse(approval.expiresAt)) return undefined;
    if (!checkDecision(options.policy, approval, action.user, 'approved').allowed) return undefined;
    const script = await scriptToEdit(approval, options.readScript);
    return editForm(approval, script, decodeThreadId(action.threadId).platform);
  };
}

/** Reads the submitted values against the card: a proposed edit, or a sentence saying what is wrong. */
function readEditValues(
  approval: Approval,
  values: Readonly<Record<string, string>>,
  scriptBefore: string | undefined,
): { edit: ProposedEdit } | { error: string } {
  const before = { gpus: approval.gpus, maxHours: approval.maxHours, name: approval.runName };
  const after: Partial<EditValues> = {};
  const gpusText = values[FIELDS.gpus]?.trim();
  if (gpusText !== undefined && editsGpus(approval)) {
    if (!/^\d+$/.test(gpusText)) return { error: `GPUs must be a whole number ≥ 0 (got "${gpusText}")` };
    after.gpus = Number(gpusText);
  }
  const hoursText = values[FIELDS.hours]?.trim();
  if (hoursText !== undefined) {
    const hours = Number(hoursText);
    if (hoursText === '' || !Number.isFinite(hours) || hours <= 0)
      return { error: `max hours must be a number above 0 (got "${hoursText}")` };
    after.maxHours = hours;
  }
  const name = values[FIELDS.name]?.trim();
  if (name !== undefined) {
    if (name === '') return { error: `the ${approval.kind === 'sweep' ? 'sweep' : 'run'} needs a name` };
    after.name = name;
  }
  const edit: ProposedEdit = { before, after };
  const script = values[FIELDS.script]?.replace(/\r\n/g, '\n');
  if (script !== undefined && scriptBefore !== undefined && script !== scriptBefore) {
    if (script.trim() === '') return { error: 'the edited script is empty' };
    edit.script = script;
  }
  return { edit };
}

/** The unified diff of an edited script against the one on the card. */
function editedScriptDiff(before: string, after: string): string {
  return createTwoFilesPatch('train.py (on the card)', 'train.py (edited)', before, after, '', '', {
    context: 3,
  });
}

/** `gpus: 2 → 1` lines for what an edit changed. */
export function editChangeLines(edits: NonNullable<Decision['edits']>): string[] {
  const lines: string[] = [];
  const { before, after } = edits;
  if (before.gpus !== after.gpus) lines.push(`GPUs: ${before.gpus} → ${after.gpus}`);
  if (before.maxHours !== after.maxHours) lines.push(`max hours: ${before.maxHours} → ${after.maxHours}`);
  if (before.name !== after.name) lines.push(`name: ${before.name} → ${after.name}`);
  if (before.schedule !== after.schedule) lines.push(`schedule: ${before.schedule} → ${after.schedule}`);
  if (edits.scriptDiff !== undefined) lines.push('script: edited');
  return lines;
}

/** The edit as the resolved card shows it: the changes, then the script's diff (redacted, cut). */
export function editOnCard(edits: NonNullable<Decision['edits']>, cut: (text: string) => string): string {
  const parts = [`Edits:\n${codeBlock(editChangeLines(edits).join('\n'))}`];
  if (edits.scriptDiff !== undefined)
    parts.push(`Script edit:\n${codeBlock(cut(redactSecrets(edits.scriptDiff).replace(/\n$/, '')), 'diff')}`);
  return parts.join('\n');
}

/** What checking an edit needs from runs and the script checks (bound by the service). */
export interface EditChecks {
  readScript(runId: string): Promise<string>;
  /** The run service's check: the values as they would be applied, or a thrown `RunError`. */
  checkRevision(runId: string, revision: Partial<EditValues>): Promise<EditValues>;
  /** The sweep service's check of a sweep card's edit (every trial checked like a run); absent: no sweeps. */
  checkSweepEdit?: ((sweepId: string, edit: Partial<EditValues>) => Promise<EditValues>) | undefined;
  /** The `schedule` command's check of a cron for the run: the cron as it would be created, or a thrown error. */
  checkSchedule?: ((runId: string, cron: string) => Promise<string>) | undefined;
  /** A syntax error with its line, or undefined when the script compiles. */
  checkSyntax?: (source: string) => Promise<string | undefined>;
  /** Throws when the script is too large for any run. */
  assertScriptSize(source: string): void;
}

/**
 * An edit form's submission checked the way a new run and a script change are: the decision's edits, or
 * a sentence for the approver (nothing is decided, the card stays open). Undefined edits: nothing changed.
 */
export async function checkEdit(
  approval: Approval,
  values: Readonly<Record<string, string>>,
  checks: EditChecks,
): Promise<{ edits: Decision['edits'] } | { error: string }> {
  if (approval.kind === 'schedule') return checkScheduleEdit(approval, values, checks);
  const scriptBefore = await scriptToEdit(approval, checks.readScript);
  const read = readEditValues(approval, values, scriptBefore);
  if ('error' in read) return read;
  const { edit } = read;
  let after: EditValues;
  try {
    if (approval.kind !== 'sweep') after = await checks.checkRevision(approval.runId, edit.after);
    else if (checks.checkSweepEdit === undefined) return { error: 'sweeps are not available here' };
    else after = await checks.checkSweepEdit(approval.runId, edit.after);
    if (edit.script !== undefined) checks.assertScriptSize(edit.script);
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
  let scriptDiff: string | undefined;
  if (edit.script !== undefined && scriptBefore !== undefined) {
    const syntaxError = await checks.checkSyntax?.(edit.script);
    if (syntaxError !== undefined) return { error: `the edited script does not compile: ${syntaxError}` };
    scriptDiff = editedScriptDiff(scriptBefore, edit.script);
  }
  const { before } = edit;
  if (
    scriptDiff === undefined &&
    after.gpus === before.gpus &&
    after.maxHours === before.maxHours &&
    after.name === before.name
  )
    return { edits: undefined };
  return {
    edits: {
      before,
      after,
      ...(edit.script === undefined || scriptDiff === undefined ? {} : { script: edit.script, scriptDiff }),
    },
  };
}

/** A recurring job's edit: the cron, checked as `schedule` checks it; the run's values stay as they are. */
async function checkScheduleEdit(
  approval: Approval,
  values: Readonly<Record<string, string>>,
  checks: EditChecks,
): Promise<{ edits: Decision['edits'] } | { error: string }> {
  const cron = values[FIELDS.schedule]?.trim();
  if (cron === undefined || cron === '') return { error: 'the recurring job needs a schedule' };
  if (checks.checkSchedule === undefined || approval.schedule === undefined)
    return { error: 'schedules are not available here' };
  let checked: string;
  try {
    checked = await checks.checkSchedule(approval.runId, cron);
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
  if (checked === approval.schedule) return { edits: undefined };
  const run = { gpus: approval.gpus, maxHours: approval.maxHours, name: approval.runName };
  return { edits: { before: { ...run, schedule: approval.schedule }, after: { ...run, schedule: checked } } };
}
