import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';

/**
 * Durable approvals. The pending request (including the agent's tool call, if any) is stored under an
 * `approvalId` with a schema version; a card button carries only that id. The first decision wins
 * atomically (SET NX on the decision key), so double clicks and races apply at most one outcome.
 */

const userSchema = z.object({ id: z.string(), name: z.string() });

export const approvalSchema = z.object({
  schemaVersion: z.literal(1),
  id: z.string(),
  kind: z.enum(['start', 'resume', 'script-change', 'sweep']),
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
  warnings: z.array(z.string()).optional(),
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

export const decisionSchema = z.object({
  decision: z.enum(['approved', 'rejected', 'expired']),
  user: userSchema,
  at: z.string(),
  auto: z.boolean(),
  note: z.string().optional(),
});
export type Decision = z.infer<typeof decisionSchema>;

export interface ApprovalStore {
  create(
    input: Omit<Approval, 'schemaVersion' | 'id' | 'createdAt' | 'expiresAt'>,
    ttlMs: number,
    now: Date,
  ): Promise<Approval>;
  get(approvalId: string): Promise<Approval | undefined>;
  setCardMessage(approvalId: string, messageId: string): Promise<void>;
  /** Records the decision if none exists yet; returns the winning decision and whether it was this one. */
  decide(approvalId: string, decision: Decision): Promise<{ won: boolean; decision: Decision }>;
  getDecision(approvalId: string): Promise<Decision | undefined>;
}

const KEEP_SECONDS = 30 * 24 * 3600;

export function createApprovalStore(options: { redis: Redis; prefix: string }): ApprovalStore {
  const { redis, prefix } = options;
  const key = (id: string) => `${prefix}:approval:${id}`;
  const decisionKey = (id: string) => `${prefix}:approval-decision:${id}`;

  async function get(approvalId: string): Promise<Approval | undefined> {
    const raw = await redis.get(key(approvalId));
    if (raw === null) return undefined;
    const parsed = approvalSchema.safeParse(parseJson(raw));
    return parsed.success ? parsed.data : undefined;
  }

  async function getDecision(approvalId: string): Promise<Decision | undefined> {
    const raw = await redis.get(decisionKey(approvalId));
    if (raw === null) return undefined;
    const parsed = decisionSchema.safeParse(parseJson(raw));
    return parsed.success ? parsed.data : undefined;
  }

  return {
    async create(input, ttlMs, now) {
      const approval: Approval = {
        ...input,
        schemaVersion: 1,
        id: `ap_${randomBytes(6).toString('hex')}`,
        createdAt: now.toISOString(),
        expiresAt: new Date(now.getTime() + ttlMs).toISOString(),
      };
      await redis.set(key(approval.id), JSON.stringify(approval), 'EX', KEEP_SECONDS);
      return approval;
    },
    get,
    async setCardMessage(approvalId, messageId) {
      const approval = await get(approvalId);
      if (approval === undefined) return;
      await redis.set(key(approvalId), JSON.stringify({ ...approval, cardMessageId: messageId }), 'KEEPTTL');
    },
    async decide(approvalId, decision) {
      const ok = await redis.set(decisionKey(approvalId), JSON.stringify(decision), 'EX', KEEP_SECONDS, 'NX');
      if (ok === 'OK') return { won: true, decision };
      const existing = await getDecision(approvalId);
      return { won: false, decision: existing ?? decision };
    },
    getDecision,
  };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
