import type { Redis } from 'ioredis';
import { RunError } from '../../errors.js';
import { RUN_FILES } from './run-files.js';
import { appendRunFile } from './run-store.js';
import { ALLOWED_TRANSITIONS, type RunStatus } from './run-types.js';

/** Who caused a transition: a person, or Shepherd itself (exit detected, restart reconcile, …). */
export type Actor = { id: string; name: string } | 'system';

export interface AuditEntry {
  ts: string;
  runId: string;
  /** `null` for the creation of the run. */
  from: RunStatus | null;
  to: RunStatus;
  by: Actor;
  reason?: string;
  /** A run's values edited on its approval card: what they were and what they became. */
  edit?: { before: RunRevisionValues; after: RunRevisionValues };
}

/** The values an approver may edit on a run's card. */
export interface RunRevisionValues {
  gpus: number;
  maxHours: number;
  name: string;
}

/** Throws `illegal_transition` unless the status machine allows `from → to`. */
export function assertTransition(from: RunStatus, to: RunStatus, runName: string): void {
  if (!ALLOWED_TRANSITIONS[from].includes(to)) {
    throw new RunError(
      'illegal_transition',
      `run ${runName} is ${from.replace('_', ' ')}; it cannot become ${to}`,
    );
  }
}

/** An attempt to change a run (pause, resume, stop, edit), allowed or refused; see run-access.ts. */
export interface AttemptEntry {
  kind: 'attempt';
  ts: string;
  runId: string;
  action: string;
  by: { id: string; name: string };
  /** The thread the attempt came from. */
  threadId: string;
  via: string;
  allowed: boolean;
  reason: string;
}

export interface AuditLog {
  record(entry: AuditEntry): Promise<void>;
  /** Who tried to change which run, from where, and whether it was allowed. */
  recordAttempt(entry: AttemptEntry): Promise<void>;
  /** Newest attempt entries (all runs), oldest first. */
  recentAttempts(count: number): Promise<AttemptEntry[]>;
  /** Newest entries from the Redis stream (all runs), oldest first. */
  recent(count: number): Promise<AuditEntry[]>;
}

/** The capped Redis stream of run transitions. */
const auditStreamKey = (prefix: string) => `${prefix}:audit`;

/** Every transition goes to the Redis stream `<prefix>:audit` (capped) and the run's `audit.jsonl`. */
export function createAuditLog(options: {
  redis: Redis;
  prefix: string;
  runDir: (runId: string) => string;
}): AuditLog {
  const key = auditStreamKey(options.prefix);

  async function recordAttempt(entry: AttemptEntry): Promise<void> {
    const line = JSON.stringify(entry);
    await appendRunFile(options.runDir(entry.runId), RUN_FILES.audit, line);
    await options.redis.xadd(key, 'MAXLEN', '~', '10000', '*', 'attempt', line);
  }

  async function recentAttempts(count: number): Promise<AttemptEntry[]> {
    const rows = await options.redis.xrevrange(key, '+', '-', 'COUNT', count);
    const entries: AttemptEntry[] = [];
    for (const [, fields] of rows) {
      const index = fields.indexOf('attempt');
      const value = index >= 0 ? fields[index + 1] : undefined;
      if (value === undefined) continue;
      try {
        const parsed = JSON.parse(value) as AttemptEntry;
        if (parsed.kind === 'attempt' && typeof parsed.runId === 'string') entries.push(parsed);
      } catch {
        // skip a malformed entry
      }
    }
    return entries.reverse();
  }

  async function record(entry: AuditEntry): Promise<void> {
    const line = JSON.stringify(entry);
    await appendRunFile(options.runDir(entry.runId), RUN_FILES.audit, line);
    await options.redis.xadd(key, 'MAXLEN', '~', '10000', '*', 'entry', line);
  }

  async function recent(count: number): Promise<AuditEntry[]> {
    const rows = await options.redis.xrevrange(key, '+', '-', 'COUNT', count);
    const entries: AuditEntry[] = [];
    for (const [, fields] of rows) {
      const index = fields.indexOf('entry');
      const value = index >= 0 ? fields[index + 1] : undefined;
      if (value === undefined) continue;
      try {
        // Written by us above; still guard against a foreign writer on the same prefix.
        const parsed = JSON.parse(value) as AuditEntry;
        if (typeof parsed.runId === 'string' && typeof parsed.to === 'string') entries.push(parsed);
      } catch {
        // skip a malformed entry
      }
    }
    return entries.reverse();
  }

  return { record, recent, recordAttempt, recentAttempts };
}
