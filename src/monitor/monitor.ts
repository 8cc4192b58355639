import { join } from 'node:path';
import { definedOnly } from '../defined-only.js';
import { createLeases, type Lease } from '../redis/lease.js';
import type { ProcessState } from '../runs/executor.js';
import { RUN_FILES } from '../runs/records/run-files.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { writeTrackerLinks } from '../runs/tracker-links.js';
import { type Evaluation, evaluate, needsCrashLog } from './evaluate.js';
import { commitRun, createStateCache, type RunCursors } from './monitor-commit.js';
import { createMonitorHolds } from './monitor-holds.js';
import { logEvaluation } from './monitor-outbox.js';
import { type MonitorState, parseMonitorState } from './monitor-state.js';
import type { Monitor, MonitorOptions, TickResult } from './monitor-types.js';
import type { AlertPolicy } from './policy-checks.js';
import { createPrintedMetricsReader, metricsSourceOf } from './printed-metrics.js';
import { chartSeries, DEFAULT_ROLLING_LIMITS, type RollingLimits } from './rolling-stats.js';
import {
  DEFAULT_MAX_BYTES_PER_READ,
  parseCursor,
  readFileTail,
  readNewLines,
  readNewLinesSync,
  type TailChunk,
} from './tail-reader.js';
import type { TickContext } from './tick-context.js';
import { watchesGpus } from './tick-extras.js';
import { readTrackerFiles } from './tracker-files.js';
import { buildTriageSnapshot } from './triage-snapshot.js';
import { DEFAULT_DETECTOR_CONFIG, type DetectorConfig, type Incident } from './types.js';

/**
 * The monitor's shell: one `tick` per run reads what is new in `metrics.jsonl` and `output.log`, hands it
 * to `evaluate` (evaluate.ts: rolling statistics and the cheap detectors, no I/O) and commits the new state
 * and the incidents whose episode just began. It never calls an LLM.
 * State, file cursors and undelivered incidents live in Redis, so a worker restart neither
 * re-reads a line, skips one, nor re-alerts.
 */

/** A tick that outlives this is presumed dead: its lease expires and the next tick may run. */
const TICK_LEASE_MS = 60_000;
const CRASH_LOG_BYTES = 64 * 1024;
/** Parsed states kept in memory between ticks (a few tens of KiB each). */
const MAX_CACHED_RUNS = 2000;

/** What a tick read before evaluating: the state and everything new in the run's files. */
interface TickInputs {
  state: MonitorState;
  metricsChunk: TailChunk;
  logChunk: TailChunk;
  alertsChunk: TailChunk;
  /** More event-file data waits beyond the per-tick cap. */
  eventsMore: boolean;
  context: TickContext;
}

/** The hash fields read with the tick's lease: the file cursors and the state's revision. */
const STATE_FIELDS = ['cursor:metrics', 'cursor:log', 'cursor:alerts', 'rev'] as const;

/**
 * A tick's lease, the fields read with it (or the state and cursors of a hold it took over), the tick's
 * clock, and whether the commit gave it up.
 */
interface HeldLease {
  lease: Lease;
  fields: ReadonlyArray<string | null>;
  held?: { state: MonitorState; cursors: RunCursors };
  now: number;
  released: boolean;
}

const SKIPPED_TICK: TickResult = {
  incidents: [],
  newPoints: 0,
  malformed: { count: 0 },
  progress: { points: 0, lastMetrics: {} },
  backlog: false,
  skipped: true,
};

/** A run's monitor keys: its state and cursors, its undelivered incidents, its lease. */
function monitorKeys(prefix: string) {
  const stateKey = (runId: string) => `${prefix}:monitor:${runId}`;
  const outboxKey = (runId: string) => `${prefix}:monitor-outbox:${runId}`;
  const lockKey = (runId: string) => `${prefix}:monitor-lock:${runId}`;
  const keysOf = (runId: string) => ({
    lock: lockKey(runId),
    state: stateKey(runId),
    outbox: outboxKey(runId),
  });
  return { stateKey, outboxKey, lockKey, keysOf };
}

/** The monitor's settings with their defaults, and its printed-metrics reader. */
function settingsOf(options: MonitorOptions) {
  const detectors: DetectorConfig = { ...DEFAULT_DETECTOR_CONFIG, ...options.detectors };
  const limits: RollingLimits = {
    ...DEFAULT_ROLLING_LIMITS,
    plateauMinImprovement: detectors.plateauMinImprovement,
    ...options.limits,
  };
  const printedMetrics = createPrintedMetricsReader(
    definedOnly({ pattern: options.metricPattern, logger: options.logger }),
  );
  const maxBytes = options.maxBytesPerTick ?? DEFAULT_MAX_BYTES_PER_READ;
  return { detectors, limits, maxBytes, clock: options.clock ?? Date.now, printedMetrics };
}

export function createMonitor(options: MonitorOptions): Monitor {
  const { redis, prefix } = options;
  const { detectors, limits, maxBytes, clock, printedMetrics } = settingsOf(options);
  const leases = createLeases(redis);
  const { stateKey, outboxKey, lockKey, keysOf } = monitorKeys(prefix);
  const cache = createStateCache(MAX_CACHED_RUNS);
  let revisionCounter = 0;

  async function loadState(runId: string): Promise<MonitorState> {
    return parseMonitorState(await redis.hget(stateKey(runId), 'state'));
  }

  /** The state (our cached copy when Redis holds the revision we wrote), cursors from `STATE_FIELDS`. */
  async function readState(runId: string, fields: ReadonlyArray<string | null>) {
    const [metricsCursor, logCursor, alertsCursor, revision] = fields;
    const cursors: RunCursors = {
      metrics: parseCursor(metricsCursor ?? null),
      log: parseCursor(logCursor ?? null),
      alerts: parseCursor(alertsCursor ?? null),
    };
    // Reuse our own parsed copy when Redis still holds the revision we wrote (the usual case with one
    // worker); otherwise, e.g. after another worker ticked this run, read the state again.
    const state = cache.take(runId, revision ?? undefined) ?? (await loadState(runId));
    return { state, cursors, revision: revision ?? undefined };
  }

  function contextOf(meta: RunMeta, runId: string, policy: AlertPolicy | undefined): TickContext {
    return {
      meta,
      runId,
      detectors,
      limits,
      printedMetrics,
      policy,
      trackerLinks: options.trackerLinks ?? true,
    };
  }

  /** The GPU utilisation for the idle-GPU detector: absent when not watched, undefined when not alive. */
  async function probeGpus(meta: RunMeta, processState: ProcessState): Promise<TickContext['gpu']> {
    if (options.gpuProbe === undefined || !watchesGpus(meta)) return undefined;
    if (processState.kind !== 'alive') return { utilisation: undefined };
    return { utilisation: await options.gpuProbe(meta.gpuIndices).catch(() => undefined) };
  }

  async function readInputs(
    runId: string,
    meta: RunMeta,
    processState: ProcessState,
    held: HeldLease,
  ): Promise<TickInputs> {
    const { state, cursors } = held.held ?? (await readState(runId, held.fields));
    const { metrics: metricsCursor, log: logCursor, alerts: alertsCursor } = cursors;
    const runDir = options.runDir(meta);
    const logPath = join(runDir, RUN_FILES.output);
    const policy = await options.policy?.load(runId);
    // A local run's files are on this machine's disk: a few KiB read synchronously cost microseconds, where
    // the promise calls (open, stat, read, close per file, and an error for a missing one) led the quiet
    // tick's profile. Other backends' files may sit on a network filesystem, which must not stall the loop.
    const read = meta.executor === 'local' ? readNewLinesSync : readNewLines;
    const metricsChunk = await read(join(runDir, RUN_FILES.metrics), metricsCursor, maxBytes);
    const logChunk = await read(logPath, logCursor, maxBytes, { carriageReturns: true });
    const alertsChunk = await read(join(runDir, RUN_FILES.alerts), alertsCursor, maxBytes);
    const events = await readTrackerFiles({
      runId,
      meta,
      runDir,
      state,
      maxBytes,
      mlflowTrackingUri: options.mlflowTrackingUri?.(meta),
      logger: options.logger,
    });
    const gpu = await probeGpus(meta, processState);
    const crashLogTail = needsCrashLog(state, meta, processState, metricsChunk, logChunk)
      ? await readFileTail(logPath, CRASH_LOG_BYTES)
      : undefined;
    const context = {
      ...contextOf(meta, runId, policy),
      gpu,
      crashLogTail,
      scriptAlertLines: alertsChunk.lines,
      eventPoints: events.points,
    };
    return { state, metricsChunk, logChunk, alertsChunk, eventsMore: events.more, context };
  }

  const newRevision = (now: number) => `${process.pid}.${++revisionCounter}.${now}`;

  const cacheState = cache.put;

  /**
   * Cursors, state and new incidents move together, and the lease is given up in the same round trip
   * (`held.released` once it is); returns the incidents still to deliver.
   */
  async function commit(
    runId: string,
    inputs: TickInputs,
    evaluation: Evaluation,
    held: HeldLease,
  ): Promise<Incident[]> {
    const { state, metricsChunk, logChunk, alertsChunk } = inputs;
    const revision = newRevision(held.now);
    const cursors = { metrics: metricsChunk.cursor, log: logChunk.cursor, alerts: alertsChunk.cursor };
    const incidents = await commitRun(
      redis,
      keysOf(runId),
      held.lease,
      {
        state,
        cursors,
        incidents: evaluation.incidents,
        revision,
        release: true,
      },
      { logger: options.logger, runId },
    );
    held.released = true;
    cacheState(runId, revision, state);
    return incidents;
  }

  /** Woken evaluations (monitor-holds.ts) on this shell's reads, context and fenced commit. */
  function createHolds() {
    return createMonitorHolds({
      leases,
      lockKey,
      stateKey,
      stateFields: STATE_FIELDS,
      readState,
      loadPolicy: async (runId) => options.policy?.load(runId),
      context: contextOf,
      runDir: options.runDir,
      maxBytes,
      clock,
      logger: options.logger,
      afterEvaluation,
      async commit(runId, hold, incidents, release) {
        const revision = newRevision(clock());
        const { state, cursors } = hold;
        const input = { state, cursors, incidents, revision, release };
        const outbox = await commitRun(redis, keysOf(runId), hold.lease, input, {
          logger: options.logger,
          runId,
        });
        // Only a released state is handed to the cache: a kept hold goes on changing it.
        if (release) cacheState(runId, revision, state);
        return { incidents: outbox, revision };
      },
      cacheState,
    });
  }
  const holds = createHolds();

  /** What a tick does after `evaluate` besides the commit: logs, the derived metrics file, tracker links. */
  async function afterEvaluation(runId: string, meta: RunMeta, state: MonitorState, evaluation: Evaluation) {
    logEvaluation(options.logger, runId, evaluation);
    await printedMetrics.writeDerived(state, options.runDir(meta), evaluation.derivedText);
    if (evaluation.linksFound && state.links !== undefined)
      await writeTrackerLinks(options.runDir(meta), state.links);
  }

  /** The stall detector asked for a hang dump: ask the executor and note how, for the alert. */
  async function askForStacks(meta: RunMeta, state: MonitorState): Promise<void> {
    const how = await options.dumpStacks?.(meta).catch((error: unknown) => {
      options.logger?.warn({ runId: meta.id, err: error }, 'could not ask for a stack dump');
      return undefined;
    });
    if (how !== undefined && state.stallDump !== undefined) state.stallDump.how = how;
    options.logger?.info(
      { runId: meta.id, how: how ?? 'unavailable' },
      'no step for the stall limit; stacks asked for',
    );
  }

  /** The shell: read → evaluate (pure) → commit. */
  async function tickLeased(
    runId: string,
    meta: RunMeta,
    processState: ProcessState,
    held: HeldLease,
  ): Promise<TickResult> {
    const now = held.now;
    const inputs = await readInputs(runId, meta, processState, held);
    const { state, metricsChunk, logChunk } = inputs;
    const evaluation = evaluate(state, metricsChunk, logChunk, processState, now, inputs.context);
    if (evaluation.dumpStacks) await askForStacks(meta, state);
    await afterEvaluation(runId, meta, state, evaluation);
    const incidents = await commit(runId, inputs, evaluation, held);
    for (const incident of evaluation.incidents)
      options.logger?.info({ runId, incident: incident.id }, incident.summary);
    const { malformed } = evaluation;
    const rolling = state.rolling;
    return {
      incidents,
      newPoints: evaluation.newPoints,
      malformed: definedOnly({ count: malformed.count, note: malformed.note }),
      progress: definedOnly({
        points: rolling.points,
        lastMetrics: { ...rolling.lastMetrics },
        lastStep: rolling.lastStep,
      }),
      backlog: metricsChunk.more || logChunk.more || inputs.alertsChunk.more || inputs.eventsMore,
      ...definedOnly({ links: evaluation.linksFound ? state.links : undefined }),
    };
  }

  return {
    async tick(runId, meta, processState) {
      // This process holds the run for wake-ups: the tick goes on from the hold's state and cursors, and its
      // commit ends the hold.
      const hold = await holds.take(runId);
      if (hold !== undefined) {
        const fields: string[] = [];
        const held: HeldLease = { lease: hold.lease, fields, held: hold, now: clock(), released: false };
        try {
          return await tickLeased(runId, meta, processState, held);
        } finally {
          if (!held.released) await held.lease.release();
        }
      }
      // Try once: a tick already running for this run does the work; this one is skipped. No renewal,
      // so a tick that hangs loses the lease after TICK_LEASE_MS and later ticks go on. The lease comes
      // with the cursors (one round trip) and goes with the commit (one more).
      const taken = await leases.tryAcquireReading(
        lockKey(runId),
        TICK_LEASE_MS,
        stateKey(runId),
        STATE_FIELDS,
      );
      if (!('lease' in taken)) return { ...SKIPPED_TICK };
      const held: HeldLease = { lease: taken.lease, fields: taken.values, now: clock(), released: false };
      try {
        return await tickLeased(runId, meta, processState, held);
      } finally {
        if (!held.released) await held.lease.release();
      }
    },

    async ack(runId, incidentIds) {
      if (incidentIds.length > 0) await redis.hdel(outboxKey(runId), ...incidentIds);
    },

    wake: holds.wake,
    endHolds: holds.endAll,

    async series(runId, metrics) {
      const state = holds.stateOf(runId) ?? (await loadState(runId));
      const names = metrics ?? Object.keys(state.rolling.metrics);
      const output: Record<string, Array<{ step: number; value: number }>> = {};
      for (const name of names)
        if (state.rolling.metrics[name] !== undefined) output[name] = chartSeries(state.rolling, name);
      return output;
    },

    async snapshot(input) {
      const state = holds.stateOf(input.meta.id) ?? (await loadState(input.meta.id));
      let logTail = state.logTail;
      if (input.processState.kind === 'exited' || input.processState.kind === 'signaled') {
        logTail = await readFileTail(join(options.runDir(input.meta), RUN_FILES.output), CRASH_LOG_BYTES);
      }
      const snapshot = buildTriageSnapshot({ ...input, rolling: state.rolling, logTail, now: clock() });
      if (metricsSourceOf(state) === 'stdout') snapshot.metricsSource = 'stdout';
      return snapshot;
    },

    loadState,

    async forget(runId) {
      cache.delete(runId);
      holds.drop(runId);
      await redis.del(stateKey(runId), outboxKey(runId), lockKey(runId));
    },

    async retire(runId, keepMs) {
      cache.delete(runId);
      holds.drop(runId);
      const ttl = Math.max(1, Math.round(keepMs));
      await redis
        .multi()
        .pexpire(stateKey(runId), ttl)
        .pexpire(outboxKey(runId), ttl)
        .del(lockKey(runId))
        .exec();
    },
  };
}
