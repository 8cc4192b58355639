import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import {
  createDecisionStore,
  type DecisionStore,
  type DecisionStoreOptions,
} from '../decisions/decision-store.js';

/**
 * Durable approvals. The pending request (including the agent's tool call, if any) is stored under an
 * `approvalId` with a schema version; a card button carries only that id. A decision card
 * (decisions/decision-store.ts): the first decision wins atomically, so double clicks and races apply at
 * most one outcome.
 */

const userSchema = z.object({ id: z.string(), name: z.string() });

const approvalSchema = z.object({
  schemaVersion: z.literal(1),
  id: z.string(),
  kind: z.enum(['start', 'resume', 'script-change', 'sweep', 'schedule']),
  runId: z.string(),
  runName: z.string(),
  threadId: z.string(),
  requester: userSchema,
  gpus: z.number().int().nonnegative(),
  maxHours: z.number().positive(),
  costUsd: z.number().nonnegative(),
  /** Diff against the previous script, or the first lines of a new one. */
  scriptExcerpt: z.string(),
  /** For script changes: the proposed source, applied only once approved. */
  proposedScript: z.string().optional(),
  reason: z.string().optional(),
  /** Checks before spending, shown on the card: the CPU pre-flight and the agent's memory estimate. */
  preflight: z.string().optional(),
  memory: z.string().optional(),
  /** Command runs: the exact command line; runs in a named environment: its description; launch warnings. */
  command: z.string().optional(),
  environment: z.string().optional(),
  /** A recurring job (`schedule <run> --cron`): its five cron fields, applied only once approved. */
  schedule: z.string().optional(),
  /** Where the run goes: the backend and what it uses (namespace and queue, flavour and price, partition). */
  backend: z.string().optional(),
  warnings: z.array(z.string()).optional(),
  /** Agent script cards: the sources of the thread's last research ("based on"). */
  basedOn: z.array(z.string()).optional(),
  /** A fork: how its configuration differs from its parent's, one `key: old → new` line each. */
  changes: z.array(z.string()).optional(),
  /** The dataset format check (`inspect_dataset` with a method) last run in the thread, as one verdict. */
  datasetCheck: z.string().optional(),
  /** Who asked: a tool call of the agent (its turn resumes on decision), a plain command, or the monitor. */
  origin: z.enum(['agent', 'command', 'monitor']),
  toolCall: z.object({ name: z.string(), input: z.unknown() }).optional(),
  /** A sweep: how many trials (`gpus`/`maxHours` are per trial, `costUsd` the total). */
  trials: z.number().int().positive().optional(),
  /** `SHEPHERD_BUDGET_USD_MONTH` and what was left of it when the card was posted. */
  budget: z.object({ limitUsd: z.number(), leftUsd: z.number() }).optional(),
  createdAt: z.string(),
  expiresAt: z.string(),
  cardMessageId: z.string().optional(),
});
export type Approval = z.infer<typeof approvalSchema>;

const editedValuesSchema = z.object({
  gpus: z.number().int().nonnegative(),
  maxHours: z.number().positive(),
  name: z.string(),
  /** A recurring job's cron (schedule cards only; older records have none). */
  schedule: z.string().optional(),
});

const decisionSchema = z.object({
  decision: z.enum(['approved', 'rejected', 'expired']),
  user: userSchema,
  at: z.string(),
  auto: z.boolean(),
  note: z.string().optional(),
  /** Approved with edits (the card's Edit form): the values (or a schedule's cron) before and after, the edited script and its diff. */
  edits: z
    .object({
      before: editedValuesSchema,
      after: editedValuesSchema,
      script: z.string().optional(),
      scriptDiff: z.string().optional(),
    })
    .optional(),
});
export type Decision = z.infer<typeof decisionSchema>;

export interface ApprovalStore extends DecisionStore<Approval, Decision> {
  create(
    input: Omit<Approval, 'schemaVersion' | 'id' | 'createdAt' | 'expiresAt'>,
    ttlMs: number,
    now: Date,
  ): Promise<Approval>;
}

export function createApprovalStore(options: DecisionStoreOptions): ApprovalStore {
  // Keys `<prefix>:approval:<id>` and `<prefix>:approval-decision:<id>`, as before the primitive.
  const decisions = createDecisionStore(
    { name: 'approval', subject: approvalSchema, decision: decisionSchema },
    options,
  );
  return {
    ...decisions,
    async create(input, ttlMs, now) {
      const approval: Approval = {
        ...input,
        schemaVersion: 1,
        id: `ap_${randomBytes(6).toString('hex')}`,
        createdAt: now.toISOString(),
        expiresAt: new Date(now.getTime() + ttlMs).toISOString(),
      };
      return decisions.save(approval.id, approval);
    },
  };
}
