import { join } from 'node:path';
import type { Logger } from '../logger.js';
import type { Lease, Leases } from '../redis/lease.js';
import { RUN_FILES } from '../runs/records/run-files.js';
import type { RunMeta } from '../runs/records/run-types.js';
import type { TrackerLinks } from '../runs/tracker-links.js';
import { type Evaluation, evaluate } from './evaluate.js';
import type { RunCursors } from './monitor-commit.js';
import type { MonitorState } from './monitor-state.js';
import type { AlertPolicy } from './policy-checks.js';
import { type FileCursor, nothingNew, readNewLinesSync, type TailChunk } from './tail-reader.js';
import type { TickContext } from './tick-context.js';
import type { Incident } from './types.js';
import { ALL_WOKEN_FILES, WOKEN_FILE_BITS, type WokenFiles } from './woken-files.js';

/**
 * Woken evaluations on a hold: the process that evaluates a run on a wake-up keeps the run's lease, state and
 * cursors in memory while its files keep growing, so each new line costs an in-memory evaluation (the same
 * pure `evaluate`, its per-point detectors) and no Redis round trip. The commit (state, cursors, incidents
 * together, fenced by the lease) is made at once when the evaluation raised something, and otherwise by the
 * next timer tick, which takes the hold over, or when the run has been quiet for `HOLD_IDLE_MS`. A process
 * that dies holding a run has committed nothing since: the next owner reads those lines again from the last
 * commit, so nothing is skipped and nothing already raised is raised again. The lease is renewed in bulk;
 * a hold whose renewal fails (taken over after an expiry) is dropped with its state.
 */

/** A hold's lease TTL: renewed in bulk every few seconds while the run stays busy. */
const HOLD_LEASE_MS = 15_000;
/** A hold is never used this close to its lease's expiry without renewing it first. */
const EXPIRY_MARGIN_MS = 3_000;
/** A run with no wake-up for this long is committed and let go (an idle run costs nothing). */
const HOLD_IDLE_MS = 5_000;
const SWEEP_MS = 1_000;
/** People's rules and mutes reach a held run within this. */
const POLICY_REFRESH_MS = 5_000;
/** Marks a hold's lease token, so another process woken by the same line leaves the run to the holder. */
const HOLD_TOKEN_PREFIX = 'hold.';
const ALIVE = { kind: 'alive' } as const;

interface Hold {
  lease: Lease;
  state: MonitorState;
  cursors: RunCursors;
  /** Revision of the last commit of this state (undefined until the hold commits). */
  revision: string | undefined;
  /** Evaluated since the last commit. */
  dirty: boolean;
  /** Files the next evaluation reads whatever the wake-up named: all of them on a new hold's first. */
  unread: WokenFiles;
  since: number;
  lastWakeAt: number;
  /** Local clock until which the lease is surely ours. */
  validUntil: number;
  policy: AlertPolicy | undefined;
  policyAt: number;
  /** The run's files, joined once per hold (joining them on every wake-up showed in its profile). */
  paths?: { directory: string; metrics: string; log: string; alerts: string };
  /** An evaluation, commit or release under way on the hold. */
  running?: Promise<unknown> | undefined;
}

/** What a woken evaluation gives its caller (incidents to deliver, as a tick does). */
export interface WokenEvaluation {
  incidents: Incident[];
  newPoints: number;
  malformedNote?: string;
  links?: TrackerLinks;
  /** Since the hold began: a hold that outlives the timer's interval asks for a full tick. */
  heldForMs: number;
}

/** `locked`: a tick holds the run (try again shortly); `held-elsewhere`: another process holds it on wake-ups. */
export type WakeResult = 'locked' | 'held-elsewhere' | WokenEvaluation;

/** What the monitor's shell lends the holds. */
interface HoldCore {
  leases: Leases;
  lockKey(runId: string): string;
  stateKey(runId: string): string;
  stateFields: readonly string[];
  readState(
    runId: string,
    fields: ReadonlyArray<string | null>,
  ): Promise<{ state: MonitorState; cursors: RunCursors; revision: string | undefined }>;
  loadPolicy(runId: string): Promise<AlertPolicy | undefined>;
  context(meta: RunMeta, runId: string, policy: AlertPolicy | undefined): TickContext;
  runDir(meta: RunMeta): string;
  maxBytes: number;
  clock(): number;
  logger: Logger | undefined;
  /** Logs, the derived metrics file, tracker links: what a tick does after `evaluate`. */
  afterEvaluation(runId: string, meta: RunMeta, state: MonitorState, evaluation: Evaluation): Promise<void>;
  /** The fenced commit (monitor-commit.ts); `release` also hands the state to the shell's cache. */
  commit(
    runId: string,
    hold: Hold,
    incidents: Incident[],
    release: boolean,
  ): Promise<{ incidents: Incident[]; revision: string }>;
  /** The state is consistent with Redis at `revision`: a later lease may reuse it. */
  cacheState(runId: string, revision: string, state: MonitorState): void;
}

function pathsOf(hold: Hold, directory: string): NonNullable<Hold['paths']> {
  if (hold.paths?.directory !== directory)
    hold.paths = {
      directory,
      metrics: join(directory, RUN_FILES.metrics),
      log: join(directory, RUN_FILES.output),
      alerts: join(directory, RUN_FILES.alerts),
    };
  return hold.paths;
}

export function createMonitorHolds(core: HoldCore) {
  const holds = new Map<string, Hold>();
  let sweeper: NodeJS.Timeout | undefined;

  async function acquire(runId: string): Promise<Hold | 'locked' | 'held-elsewhere'> {
    const taken = await core.leases.tryAcquireReading(
      core.lockKey(runId),
      HOLD_LEASE_MS,
      core.stateKey(runId),
      core.stateFields,
      HOLD_TOKEN_PREFIX,
    );
    if (!('lease' in taken)) return taken.holder.startsWith(HOLD_TOKEN_PREFIX) ? 'held-elsewhere' : 'locked';
    const now = core.clock();
    const read = await core.readState(runId, taken.values);
    const hold: Hold = {
      lease: taken.lease,
      ...read,
      dirty: false,
      unread: ALL_WOKEN_FILES,
      since: now,
      lastWakeAt: now,
      validUntil: now + HOLD_LEASE_MS - EXPIRY_MARGIN_MS,
      policy: await core.loadPolicy(runId),
      policyAt: now,
    };
    holds.set(runId, hold);
    sweeper ??= setInterval(() => void sweep(), SWEEP_MS).unref();
    return hold;
  }

  /** One woken evaluation on the hold: the new lines, read synchronously, through the pure `evaluate`. */
  async function evaluateHeld(
    runId: string,
    meta: RunMeta,
    hold: Hold,
    files: WokenFiles,
  ): Promise<WokenEvaluation> {
    const now = core.clock();
    hold.lastWakeAt = now;
    if (now - hold.policyAt >= POLICY_REFRESH_MS) {
      hold.policy = await core.loadPolicy(runId);
      hold.policyAt = now;
    }
    const paths = pathsOf(hold, core.runDir(meta));
    const { cursors, state } = hold;
    const reading = files | hold.unread;
    hold.unread = 0;
    const metrics = readIf(reading & WOKEN_FILE_BITS.metrics, paths.metrics, cursors.metrics, false);
    const log = readIf(reading & WOKEN_FILE_BITS.log, paths.log, cursors.log, true);
    const alerts = readIf(reading & WOKEN_FILE_BITS.alerts, paths.alerts, cursors.alerts, false);
    // A read that hit the byte cap goes on at the next wake-up, whichever file that one names.
    if (metrics.more) hold.unread |= WOKEN_FILE_BITS.metrics;
    if (log.more) hold.unread |= WOKEN_FILE_BITS.log;
    if (alerts.more) hold.unread |= WOKEN_FILE_BITS.alerts;
    const heldForMs = now - hold.since;
    const changed = [metrics, log, alerts].some((chunk) => chunk.lines.length > 0 || chunk.reset);
    if (!changed) return { incidents: [], newPoints: 0, heldForMs };
    const context = {
      ...core.context(meta, runId, hold.policy),
      woken: true,
      scriptAlertLines: alerts.lines,
    };
    const evaluation = evaluate(state, metrics, log, ALIVE, now, context);
    hold.cursors = {
      metrics: metrics.cursor ?? cursors.metrics,
      log: log.cursor ?? cursors.log,
      alerts: alerts.cursor ?? cursors.alerts,
    };
    hold.dirty = true;
    await core.afterEvaluation(runId, meta, state, evaluation);
    const result: WokenEvaluation = { incidents: [], newPoints: evaluation.newPoints, heldForMs };
    if (evaluation.malformed.note !== undefined) result.malformedNote = evaluation.malformed.note;
    if (evaluation.linksFound && state.links !== undefined) result.links = state.links;
    // Anything said goes out only once it is committed (a crash must not raise it twice).
    if (evaluation.incidents.length > 0 || result.malformedNote !== undefined || result.links !== undefined)
      result.incidents = await checkpoint(runId, hold, evaluation.incidents, false);
    return result;
  }

  /** The file's new lines when the wake-up named it; nothing new (and nothing read) otherwise. */
  function readIf(
    named: number,
    path: string,
    cursor: FileCursor | undefined,
    carriageReturns: boolean,
  ): TailChunk {
    if (named === 0) return nothingNew(cursor);
    return readNewLinesSync(path, cursor, core.maxBytes, carriageReturns ? { carriageReturns } : {});
  }

  async function checkpoint(runId: string, hold: Hold, incidents: Incident[], release: boolean) {
    const sentAt = core.clock();
    try {
      const committed = await core.commit(runId, hold, incidents, release);
      hold.revision = committed.revision;
      hold.dirty = false;
      hold.validUntil = sentAt + HOLD_LEASE_MS - EXPIRY_MARGIN_MS;
      return committed.incidents;
    } catch (error) {
      // The lease was taken over: what this hold evaluated since its last commit is the new owner's to redo.
      if (holds.get(runId) === hold) holds.delete(runId);
      throw error;
    }
  }

  /** Runs `work` on the hold, marked as under way (a tick taking the hold over waits for it). */
  async function onHold<T>(hold: Hold, work: () => Promise<T>): Promise<T> {
    const running = work();
    hold.running = running;
    try {
      return await running;
    } finally {
      if (hold.running === running) hold.running = undefined;
    }
  }

  /** Commit what is not yet and let the run go (quiet for a while, or the process is closing). */
  async function end(runId: string, hold: Hold): Promise<void> {
    holds.delete(runId);
    if (hold.dirty) {
      await checkpoint(runId, hold, [], true);
      return;
    }
    await hold.lease.release();
    if (hold.revision !== undefined) core.cacheState(runId, hold.revision, hold.state);
  }

  /** Every second: quiet holds end; the others' leases are renewed together when half their TTL is gone. */
  async function sweep(): Promise<void> {
    const now = core.clock();
    const renewing: Array<[string, Hold]> = [];
    for (const [runId, hold] of holds) {
      if (hold.running !== undefined) continue;
      if (now - hold.lastWakeAt >= HOLD_IDLE_MS)
        void onHold(hold, () => end(runId, hold)).catch((error: unknown) => {
          core.logger?.warn({ runId, err: error }, 'could not commit a quiet run; its next tick reads again');
        });
      else if (hold.validUntil - now < HOLD_LEASE_MS / 2) renewing.push([runId, hold]);
    }
    if (holds.size === 0 && sweeper !== undefined) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
    if (renewing.length === 0) return;
    const held = await core.leases.renewAll(renewing.map(([, hold]) => hold.lease)).catch(() => undefined);
    renewing.forEach(([runId, hold], index) => {
      if (held === undefined) return;
      if (held[index] === true) hold.validUntil = now + HOLD_LEASE_MS - EXPIRY_MARGIN_MS;
      else if (holds.get(runId) === hold) holds.delete(runId);
    });
  }

  /** The hold, renewed first when its lease is near expiry; dropped (and re-taken) when it was lost. */
  async function current(runId: string): Promise<Hold | 'locked' | 'held-elsewhere'> {
    const hold = holds.get(runId);
    if (hold === undefined) return acquire(runId);
    if (hold.running !== undefined) return 'locked';
    if (core.clock() < hold.validUntil) return hold;
    const sentAt = core.clock();
    if (await hold.lease.renew()) {
      hold.validUntil = sentAt + HOLD_LEASE_MS - EXPIRY_MARGIN_MS;
      return hold;
    }
    holds.delete(runId);
    return acquire(runId);
  }

  return {
    /** One woken evaluation of the run (its files grew). */
    async wake(runId: string, meta: RunMeta, files: WokenFiles = ALL_WOKEN_FILES): Promise<WakeResult> {
      const hold = await current(runId);
      if (typeof hold === 'string') return hold;
      return onHold(hold, () => evaluateHeld(runId, meta, hold, files));
    },
    /** Take the run's hold out for a tick, once what runs on it finished; undefined when not held here. */
    async take(runId: string): Promise<Hold | undefined> {
      for (let hold = holds.get(runId); hold !== undefined; hold = holds.get(runId)) {
        if (hold.running === undefined) {
          holds.delete(runId);
          return hold;
        }
        await hold.running.catch(() => undefined);
      }
      return undefined;
    },
    /** The newest state of a run held here (fresher than Redis between commits). */
    stateOf: (runId: string): MonitorState | undefined => holds.get(runId)?.state,
    /** Forget the run's hold without committing (its keys are going). */
    drop(runId: string): void {
      holds.delete(runId);
    },
    /** Commit every hold and let them go (the process is closing). */
    async endAll(): Promise<void> {
      if (sweeper !== undefined) clearInterval(sweeper);
      sweeper = undefined;
      const ending = [...holds].map(async ([runId, hold]) => {
        await hold.running?.catch(() => undefined);
        if (holds.get(runId) === hold) await end(runId, hold);
      });
      await Promise.allSettled(ending);
    },
  };
}
