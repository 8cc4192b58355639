import type { Queue } from 'bullmq';
import type { ActionOutcome, CardForm, ChatUser, InboundAction } from '../bot/chat-adapter.js';
import type { Notifier } from '../bot/notifier.js';
import { RUN_REFERENCE } from '../commands/parse-command.js';
import { parseFork } from '../commands/parse-fork.js';
import { definedOnly } from '../defined-only.js';
import { type ControlJob, enqueue, JOBS } from '../queue/jobs.js';
import type { ForkRequest } from '../runs/operations/fork-config.js';
import { userFacingError } from '../runs/operations/run-texts.js';
import type { RunMeta } from '../runs/records/run-types.js';
import type { RunQueries } from '../runs/run-queries.js';
import type { ModelSummary } from './model-summary.js';

/**
 * The Fork and Compare buttons of the model-ready card. Fork opens a form (step, changes, name, GPUs) and
 * Compare one for the other run when none is implied (the fork's parent, else the previous finished run in
 * the thread); the work then runs off the click, in a control job, through the very calls `fork` and
 * `compare` make, so the card, the diff and the comparison are theirs. Only someone who may act on the run
 * (run-access rules) gets a form or the work; anyone else gets the refusal.
 */

export type ModelActionVerb = 'fork' | 'compare';
type ModelActionJob = Extract<ControlJob, { kind: 'model-action' }>;

const FIELDS = {
  fromStep: 'from_step',
  changes: 'changes',
  name: 'name',
  gpus: 'gpus',
  other: 'run',
} as const;
const FINISHED: ReadonlySet<string> = new Set(['completed', 'failed', 'stopped']);

interface ModelActionsOptions {
  runs: RunQueries;
  notifier: Notifier;
  controlQueue: Queue;
  /** Run-access rules without auditing (showing a form changes nothing). */
  mayAct(meta: RunMeta, actor: ChatUser, threadId: string): boolean;
  /** Audited run-access check of the click: the refusal sentence, or undefined when it counts. */
  refusal(
    meta: RunMeta,
    actor: ChatUser,
    threadId: string,
    verb: ModelActionVerb,
  ): Promise<string | undefined>;
  /** The best healthy checkpoint (nearest at or before the best metric step), the fork form's default. */
  bestHealthyStep(meta: RunMeta): Promise<number | undefined>;
  summarise(meta: RunMeta): Promise<ModelSummary>;
  /** `fork <run> …` (RunOperations.fork). */
  fork(reference: string, request: ForkRequest, actor: ChatUser, threadId: string): Promise<string>;
  /** `compare …` (the sweeps' run comparison). */
  compare(request: {
    references: string[];
    metric?: string;
    mode?: 'min' | 'max';
    threadId: string;
  }): Promise<string>;
}

function forkForm(meta: RunMeta, step: number | undefined): CardForm {
  return {
    title: `Fork ${meta.name}`.slice(0, 24),
    submitLabel: 'Ask for approval',
    fields: [
      {
        id: FIELDS.fromStep,
        label: 'From checkpoint step (empty: newest healthy)',
        optional: true,
        maxLength: 12,
        ...definedOnly({ initial: step === undefined ? undefined : String(step) }),
      },
      {
        id: FIELDS.changes,
        label: 'Changes: key=value, space-separated',
        optional: true,
        multiline: true,
        maxLength: 1000,
      },
      {
        id: FIELDS.name,
        label: 'Name of the fork',
        initial: `${meta.name}-fork`.slice(0, 100),
        maxLength: 100,
      },
      { id: FIELDS.gpus, label: 'GPUs', initial: String(meta.gpus), maxLength: 4 },
    ],
  };
}

/** The form's values as the `fork` command's words, parsed by the command's own parser. */
function forkRequestOf(meta: RunMeta, values: Readonly<Record<string, string>>): ForkRequest | string {
  const value = (id: string) => values[id]?.trim() ?? '';
  const tokens = [meta.id];
  if (value(FIELDS.fromStep) !== '') tokens.push('--from-step', value(FIELDS.fromStep));
  for (const setting of value(FIELDS.changes)
    .split(/\s+/)
    .filter((word) => word !== ''))
    tokens.push('--set', setting);
  if (value(FIELDS.name) !== '') tokens.push('--name', value(FIELDS.name));
  if (value(FIELDS.gpus) !== '') tokens.push('--gpus', value(FIELDS.gpus));
  const parsed = parseFork(tokens, RUN_REFERENCE);
  if (parsed === undefined) return 'the form could not be read';
  return 'error' in parsed ? parsed.error : parsed.request;
}

export function createModelActions(options: ModelActionsOptions) {
  const { runs, notifier } = options;

  /** The run to compare with when none is named: the fork's parent, else the previous finished run here. */
  async function impliedOther(meta: RunMeta): Promise<RunMeta | undefined> {
    if (meta.forkOf !== undefined) return runs.get(meta.forkOf.runId).catch(() => undefined);
    const earlier = (await runs.inThread(meta.threadId)).filter(
      (other) => other.id !== meta.id && FINISHED.has(other.status) && other.createdAt < meta.createdAt,
    );
    return earlier.sort((a, b) => (a.endedAt ?? a.createdAt).localeCompare(b.endedAt ?? b.createdAt)).at(-1);
  }

  async function form(action: InboundAction, verb: ModelActionVerb, runId: string) {
    const meta = await runs.get(runId).catch(() => undefined);
    // Someone whose click would not count gets no form: the click itself is refused.
    if (meta === undefined || !options.mayAct(meta, action.user, action.threadId)) return undefined;
    if (verb === 'fork') return forkForm(meta, await options.bestHealthyStep(meta).catch(() => undefined));
    if ((await impliedOther(meta)) !== undefined) return undefined;
    return {
      title: 'Compare',
      submitLabel: 'Compare',
      fields: [{ id: FIELDS.other, label: `Compare ${meta.name} with run:`.slice(0, 45), maxLength: 100 }],
    } satisfies CardForm;
  }

  async function onClick(
    action: InboundAction,
    verb: ModelActionVerb,
    runId: string,
  ): Promise<ActionOutcome> {
    const meta = await runs.get(runId).catch(() => undefined);
    if (meta === undefined) return { status: 'unknown', message: 'this run no longer exists' };
    const refused = await options.refusal(meta, action.user, action.threadId, verb);
    if (refused !== undefined) return { status: 'forbidden', message: refused };
    await enqueue(options.controlQueue, JOBS.modelAction, {
      v: 1,
      kind: 'model-action',
      verb,
      runId,
      user: { id: action.user.id, name: action.user.name },
      threadId: action.threadId,
      ...definedOnly({ values: action.values }),
    });
    return {
      status: 'accepted',
      message: verb === 'fork' ? `Forking ${meta.name}…` : `Comparing ${meta.name}…`,
    };
  }

  async function forkOf(meta: RunMeta, job: ModelActionJob): Promise<string> {
    const request = forkRequestOf(meta, job.values ?? {});
    if (typeof request === 'string') return `Fork of ${meta.name}: ${request}`;
    return options.fork(meta.id, request, job.user, job.threadId);
  }

  async function compareOf(meta: RunMeta, job: ModelActionJob): Promise<string> {
    const named = job.values?.[FIELDS.other]?.trim() ?? '';
    const other = named !== '' ? named : (await impliedOther(meta))?.id;
    if (other === undefined)
      return `${meta.name} is no fork and no earlier run in this thread has finished: send \`@shepherd compare ${meta.name} <other run>\`.`;
    const { metric } = await options.summarise(meta);
    return options.compare({
      references: [meta.id, other],
      metric: metric.name,
      mode: metric.mode,
      threadId: job.threadId,
    });
  }

  /** The control job: the fork's approval card or the comparison, or the reason there is none. */
  async function apply(job: ModelActionJob): Promise<void> {
    const meta = await runs.get(job.runId).catch(() => undefined);
    if (meta === undefined) {
      await notifier.post(job.threadId, `The run ${job.runId} no longer exists.`);
      return;
    }
    let text: string;
    try {
      text = job.verb === 'fork' ? await forkOf(meta, job) : await compareOf(meta, job);
    } catch (error) {
      text = `${job.verb === 'fork' ? 'Fork' : 'Compare'}: ${userFacingError(error)}`;
    }
    if (text !== '') await notifier.post(job.threadId, text);
  }

  return { form, onClick, apply };
}
