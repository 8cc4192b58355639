import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { ActionOutcome, Card } from '../bot/chat-adapter.js';
import type { Notifier } from '../bot/notifier.js';
import { DecisionRecordError } from '../errors.js';

/**
 * One decision card, the primitive behind approvals, alert buttons and stop confirmations:
 * - a durable record of what is being decided (the subject), zod-validated on every read;
 * - the first click wins atomically (SET NX on the decision key), so double clicks and races record one
 *   decision;
 * - the click only records and enqueues a control job; the job calls `settle`, which runs the decision's
 *   effect once (its outcome is stored, so a retried job reuses it instead of applying it again) and edits
 *   the card to its resolved form.
 * It lives in its own folder because both features (approvals/, monitor/) and tools/ use it and it knows
 * none of them.
 */

interface DecisionSchema<Subject, Decision> {
  /** Names the keys: `<prefix>:<name>:<id>` (subject), `<name>-decision:<id>`, `<name>-applied:<id>`. */
  name: string;
  subject: z.ZodType<Subject>;
  decision: z.ZodType<Decision>;
  /** How long the records are kept (default 30 days). */
  keepSeconds?: number;
}

/** What every decision card's subject carries: where its card is. */
interface CardSubject {
  threadId: string;
  cardMessageId?: string | undefined;
}

interface ClickOptions<Subject, Decision> {
  /** Said when the subject is gone (expired, deleted, or unreadable). */
  unknown: string;
  /** Checks a click against the subject (policy, expiry, access): the decision to record, or a refusal. */
  choose(subject: Subject, existing: Decision | undefined): Promise<{ decision: Decision } | ActionOutcome>;
  /** Said to a click that lost the race. */
  lost(winner: Decision): string;
  /** Enqueues the control job that applies the decision; called for the winning click only. */
  enqueue(subject: Subject, decision: Decision): Promise<void>;
  /** Said to the winning click. */
  accepted?: (decision: Decision) => string;
}

interface SettleOptions<Subject, Decision> {
  /** The decision's effect; its outcome line is stored, so it runs once however often the job is retried. */
  effect(subject: Subject, decision: Decision): Promise<string>;
  /** The card once decided, its buttons replaced by the outcome. */
  resolvedCard(subject: Subject, decision: Decision, outcome: string): Card;
  /** Runs after the card is resolved (thread posts, the agent's event); a retried job runs it again. */
  after?(subject: Subject, decision: Decision, outcome: string): Promise<void>;
}

interface Settled<Subject, Decision> {
  subject: Subject;
  decision: Decision;
  outcome: string;
  /** False when an earlier attempt of the job already ran the effect. */
  applied: boolean;
}

export interface DecisionStore<Subject extends CardSubject, Decision> {
  save(id: string, subject: Subject): Promise<Subject>;
  /** The subject, undefined when absent; a record that does not parse throws `DecisionRecordError`. */
  get(id: string): Promise<Subject | undefined>;
  setCardMessage(id: string, messageId: string): Promise<void>;
  /** Records the decision if none exists yet; returns the winning decision and whether it was this one. */
  decide(id: string, decision: Decision): Promise<{ won: boolean; decision: Decision }>;
  getDecision(id: string): Promise<Decision | undefined>;
  /** A button click: check, record (first click wins), enqueue the control job, answer at once. */
  click(id: string, options: ClickOptions<Subject, Decision>): Promise<ActionOutcome>;
  /** The control job: applies the recorded decision once and resolves the card; undefined if none. */
  settle(
    id: string,
    options: SettleOptions<Subject, Decision>,
  ): Promise<Settled<Subject, Decision> | undefined>;
}

export interface DecisionStoreOptions {
  redis: Redis;
  prefix: string;
  /** Edits the card when a decision is settled. */
  notifier: Pick<Notifier, 'updateCard'>;
  /** Told of unreadable records met by a click (the click itself answers "unknown"). */
  onInvalid?: (error: DecisionRecordError) => void;
}

const KEEP_SECONDS = 30 * 24 * 3600;
const outcomeSchema = z.object({ outcome: z.string() });

export function createDecisionStore<Subject extends CardSubject, Decision>(
  schema: DecisionSchema<Subject, Decision>,
  options: DecisionStoreOptions,
): DecisionStore<Subject, Decision> {
  const { redis, prefix } = options;
  const keep = schema.keepSeconds ?? KEEP_SECONDS;
  const subjectKey = (id: string) => `${prefix}:${schema.name}:${id}`;
  const decisionKey = (id: string) => `${prefix}:${schema.name}-decision:${id}`;
  const appliedKey = (id: string) => `${prefix}:${schema.name}-applied:${id}`;

  async function read<Value>(key: string, parser: z.ZodType<Value>): Promise<Value | undefined> {
    const raw = await redis.get(key);
    if (raw === null) return undefined;
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (error) {
      throw new DecisionRecordError(key, `${key} is not JSON`, { cause: error });
    }
    const parsed = parser.safeParse(json);
    if (!parsed.success)
      throw new DecisionRecordError(key, `${key} does not match its schema: ${parsed.error.message}`);
    return parsed.data;
  }

  const get = (id: string) => read(subjectKey(id), schema.subject);
  const getDecision = (id: string) => read(decisionKey(id), schema.decision);

  async function decide(id: string, decision: Decision) {
    const won = await redis.set(decisionKey(id), JSON.stringify(decision), 'EX', keep, 'NX');
    if (won === 'OK') return { won: true, decision };
    return { won: false, decision: (await getDecision(id)) ?? decision };
  }

  async function click(id: string, click: ClickOptions<Subject, Decision>): Promise<ActionOutcome> {
    let subject: Subject | undefined;
    let existing: Decision | undefined;
    try {
      [subject, existing] = await Promise.all([get(id), getDecision(id)]);
    } catch (error) {
      if (!(error instanceof DecisionRecordError)) throw error;
      options.onInvalid?.(error);
      return { status: 'unknown', message: click.unknown };
    }
    if (subject === undefined) return { status: 'unknown', message: click.unknown };
    const chosen = await click.choose(subject, existing);
    if (!('decision' in chosen)) return chosen;
    const result = await decide(id, chosen.decision);
    if (!result.won) return { status: 'resolved', message: click.lost(result.decision) };
    await click.enqueue(subject, chosen.decision);
    const message = click.accepted?.(chosen.decision);
    return message === undefined ? { status: 'accepted' } : { status: 'accepted', message };
  }

  /** Runs the effect unless an earlier attempt stored its outcome. */
  async function applyOnce(id: string, run: () => Promise<string>) {
    const stored = await read(appliedKey(id), outcomeSchema);
    if (stored !== undefined) return { outcome: stored.outcome, applied: false };
    const outcome = await run();
    await redis.set(appliedKey(id), JSON.stringify({ outcome }), 'EX', keep, 'NX');
    return { outcome, applied: true };
  }

  async function settle(id: string, settle: SettleOptions<Subject, Decision>) {
    const subject = await get(id);
    const decision = await getDecision(id);
    if (subject === undefined || decision === undefined) return undefined;
    const { outcome, applied } = await applyOnce(id, () => settle.effect(subject, decision));
    if (subject.cardMessageId !== undefined) {
      await options.notifier.updateCard(
        subject.threadId,
        subject.cardMessageId,
        settle.resolvedCard(subject, decision, outcome),
      );
    }
    await settle.after?.(subject, decision, outcome);
    return { subject, decision, outcome, applied };
  }

  return {
    async save(id, subject) {
      await redis.set(subjectKey(id), JSON.stringify(subject), 'EX', keep);
      return subject;
    },
    get,
    async setCardMessage(id, messageId) {
      const subject = await get(id);
      if (subject === undefined) return;
      await redis.set(subjectKey(id), JSON.stringify({ ...subject, cardMessageId: messageId }), 'KEEPTTL');
    },
    decide,
    getDecision,
    click,
    settle,
  };
}
