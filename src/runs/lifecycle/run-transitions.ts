import { definedOnly } from '../../defined-only.js';
import { RunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { type Actor, type AuditLog, assertTransition } from '../records/audit-log.js';
import type { RunStore } from '../records/run-store.js';
import { ALLOWED_TRANSITIONS, type RunMeta, type RunStatus } from '../records/run-types.js';
import type { RunEvent, RunEventHandler, RunEventType } from './run-events.js';
import type { RunLock } from './run-lock.js';

/** One status change: who did it, the audit reason, the user-facing reason and meta edits. */
interface StatusChange {
  by: Actor;
  reason?: string;
  statusReason?: string;
  patch?: Partial<RunMeta>;
  clear?: Array<keyof RunMeta>;
}

/** The core of every run change: checked, audited status writes under the per-run lock, and events. */
export interface RunTransitions {
  now: () => Date;
  /** Tell the event handler (if any); a failing handler is logged, never thrown. */
  emit(type: RunEventType, meta: RunMeta, message: string): Promise<void>;
  /** Check the transition, write the meta and record it in the audit log. */
  setStatus(meta: RunMeta, to: RunStatus, change: StatusChange): Promise<RunMeta>;
  /** Write a meta change that is not a status transition (no audit entry). */
  writeQuietly(meta: RunMeta, patch: Partial<RunMeta>): Promise<RunMeta>;
  /** Resolve a reference, take the run lock, re-read the meta under it (compare-and-set), then work. */
  withRun<T>(reference: string, work: (meta: RunMeta) => Promise<T>, waitMs?: number): Promise<T>;
  /** Like `withRun` but skips a run another process is changing right now. */
  tryWithRun<T>(runId: string, work: (meta: RunMeta) => Promise<T>): Promise<T | undefined>;
}

interface RunTransitionsOptions {
  store: RunStore;
  audit: AuditLog;
  lock: RunLock;
  logger: Logger;
  now: () => Date;
  /** Default wait for the run lock in `withRun`. */
  userWaitMs: number;
  onEvent: RunEventHandler | undefined;
  /**
   * After a run reached a status it cannot leave (stopped, completed, rejected; not `failed`, which a fix
   * can still relaunch); a failure is logged, never thrown.
   */
  onTerminal: ((meta: RunMeta) => Promise<void>) | undefined;
}

export function createRunTransitions(options: RunTransitionsOptions): RunTransitions {
  const { store, audit, lock, logger, now, userWaitMs } = options;

  async function emit(type: RunEventType, meta: RunMeta, message: string): Promise<void> {
    if (options.onEvent === undefined) return;
    const event: RunEvent = { type, meta, message };
    try {
      await options.onEvent(event);
    } catch (error) {
      logger.warn({ err: error, runId: meta.id, type }, 'run event handler failed');
    }
  }

  async function setStatus(meta: RunMeta, to: RunStatus, change: StatusChange): Promise<RunMeta> {
    assertTransition(meta.status, to, meta.name);
    const at = now().toISOString();
    const next: RunMeta = { ...meta, ...change.patch, status: to, updatedAt: at };
    delete next.statusReason;
    // A status change ends any stop Shepherd asked for (see `RunMeta.stopRequested`).
    delete next.stopRequested;
    for (const key of change.clear ?? []) delete next[key];
    if (change.statusReason !== undefined) next.statusReason = change.statusReason;
    if (to === 'queued') next.queuedAt = at;
    // A new approval (or a person's resume) grants a new `--hours` budget; automatic relaunches (by
    // `system`) spend the one they run under.
    if (to === 'pending_approval' || (to === 'queued' && change.by !== 'system')) delete next.priorHours;
    await store.writeMeta(next);
    await audit.record({
      ts: at,
      runId: meta.id,
      from: meta.status,
      to,
      by: change.by,
      ...definedOnly({ reason: change.reason }),
    });
    if (ALLOWED_TRANSITIONS[to].length === 0 && options.onTerminal !== undefined) {
      await options.onTerminal(next).catch((error: unknown) => {
        logger.warn({ err: error, runId: meta.id }, 'clean-up after the end of a run failed');
      });
    }
    return next;
  }

  async function writeQuietly(meta: RunMeta, patch: Partial<RunMeta>): Promise<RunMeta> {
    const next: RunMeta = { ...meta, ...patch, updatedAt: now().toISOString() };
    await store.writeMeta(next);
    return next;
  }

  async function withRun<T>(
    reference: string,
    work: (meta: RunMeta) => Promise<T>,
    waitMs = userWaitMs,
  ): Promise<T> {
    const found = await store.findRun(reference);
    return lock.withLock(found.id, async () => work(await store.readMeta(found.id)), { waitMs });
  }

  async function tryWithRun<T>(runId: string, work: (meta: RunMeta) => Promise<T>): Promise<T | undefined> {
    try {
      return await lock.withLock(runId, async () => work(await store.readMeta(runId)), { waitMs: 0 });
    } catch (error) {
      if (error instanceof RunError && error.code === 'run_busy') return undefined;
      throw error;
    }
  }

  return { now, emit, setStatus, writeQuietly, withRun, tryWithRun };
}
