import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { definedOnly } from '../defined-only.js';
import type { Logger } from '../logger.js';
import { createLeases, type Lease } from '../redis/lease.js';
import type { ProcessState } from '../runs/executor.js';
import { RUN_FILES } from '../runs/records/run-files.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { type TrackerLinks, writeTrackerLinks } from '../runs/tracker-links.js';
import type { AlertPolicy } from './alert-policy.js';
import { type Evaluation, evaluate, needsCrashLog } from './evaluate.js';
import type { GpuProbe } from './gpu-probe.js';
import { logEvaluation, MAX_OUTBOX, parseOutbox } from './monitor-outbox.js';
import { type MonitorState, parseMonitorState, serialiseMonitorState } from './monitor-state.js';
import { createPrintedMetricsReader, metricsSourceOf } from './printed-metrics.js';
import { chartSeries, DEFAULT_ROLLING_LIMITS, type RollingLimits } from './rolling-stats.js';
import {
  DEFAULT_MAX_BYTES_PER_READ,
  parseCursor,
  readFileTail,
  readNewLines,
  type TailChunk,
} from './tail-reader.js';
import type { TickContext } from './tick-context.js';
import { watchesGpus } from './tick-extras.js';
import { readTrackerFiles } from './tracker-files.js';
import { buildTriageSnapshot, type TriageSnapshot } from './triage-snapshot.js';
import { DEFAULT_DETECTOR_CONFIG, type DetectorConfig, type Incident } from './types.js';

/**
 * The monitor's shell: one `tick` per run reads what is new in `metrics.jsonl` and `output.log`, hands it
 * to `evaluate` (evaluate.ts: rolling statistics and the cheap detectors, no I/O) and commits the new state
 * and the incidents whose episode just began. It never calls an LLM.
 * State, file cursors and undelivered incidents live in Redis, so a worker restart neither
 * re-reads a line, skips one, nor re-alerts.
 */

export interface MonitorOptions {
  redis: Redis;
  prefix: string;
  /** Absolute run directory for a run (holds metrics.jsonl and output.log). */
  runDir: (meta: RunMeta) => string;
  detectors?: Partial<DetectorConfig>;
  limits?: Partial<RollingLimits>;
  /** Byte cap per file per tick; the rest is read on the next tick. */
  maxBytesPerTick?: number;
  clock?: () => number;
  logger?: Logger;
  /** SHEPHERD_METRIC_PATTERN, compiled: tried first on output.log lines. */
  metricPattern?: RegExp;
  /** People's rules and mutes of a run (alert-policy.ts); absent = none. */
  policy?: { load(runId: string): Promise<AlertPolicy> };
  /** GPU utilisation probe (nvidia-smi) for the idle-GPU detector; absent = detector off. */
  gpuProbe?: GpuProbe;
  /** Hang dumps: asks a stalled run for its stacks (into output.log); how, or undefined when it cannot. */
  dumpStacks?: (meta: RunMeta) => Promise<string | undefined>;
  /** Look for tracker links (W&B, MLflow…) in output.log (SHEPHERD_TRACKER_LINKS; default on). */
  trackerLinks?: boolean;
  /** MLFLOW_TRACKING_URI as a run's environment sets it (a `file:` store is read too); absent = unset. */
  mlflowTrackingUri?: (meta: RunMeta) => string | undefined;
}

export interface TickResult {
  /** Incidents to deliver: new ones plus any not yet acknowledged with `ack` (at-least-once). */
  incidents: Incident[];
  newPoints: number;
  malformed: { count: number; note?: string };
  progress: { lastStep?: number; points: number; lastMetrics: Record<string, number> };
  /** More data than the per-tick cap was waiting; the rest is read next tick. */
  backlog: boolean;
  /** The tick was skipped because another tick of the same run held the lock. */
  skipped?: boolean;
  /** The run's tracker links, when this tick found new ones (for its started card). */
  links?: TrackerLinks;
}

/** A tick that outlives this is presumed dead: its lease expires and the next tick may run. */
const TICK_LEASE_MS = 60_000;
const CRASH_LOG_BYTES = 64 * 1024;
/** Parsed states kept in memory between ticks (a few tens of KiB each). */
const MAX_CACHED_RUNS = 2000;

export interface Monitor {
  /**
   * One monitor tick for a run. Returns the incidents to deliver; call `ack` with their ids once posted.
   * Concurrent ticks of the same run are serialised by a Redis lease (the loser is skipped).
   */
  tick(runId: string, meta: RunMeta, processState: ProcessState): Promise<TickResult>;
  /** Mark incidents as delivered so later ticks stop returning them. */
  ack(runId: string, incidentIds: string[]): Promise<void>;
  /** Chart series (downsampled history + recent window) for the given metrics, or all tracked ones. */
  series(runId: string, metrics?: string[]): Promise<Record<string, Array<{ step: number; value: number }>>>;
  /** A compact, bounded snapshot for LLM triage (never called by the monitor itself). */
  snapshot(input: {
    meta: RunMeta;
    processState: ProcessState;
    script?: string;
    incident?: Incident;
  }): Promise<TriageSnapshot>;
  /** The raw persisted state (tests, debugging). */
  loadState(runId: string): Promise<MonitorState>;
  /** Delete everything the monitor keeps for a run (after it ended and its last tick ran). */
  forget(runId: string): Promise<void>;
  /**
   * A run that may come back (paused, or failed and open to a fix) keeps its state for `keepMs` after its
   * last tick, for triage and for a resume that goes on from its cursors; a later tick keeps it again.
   */
  retire(runId: string, keepMs: number): Promise<void>;
}

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

/** A tick's lease, the fields read with it, the tick's clock, and whether the commit gave it up. */
interface HeldLease {
  lease: Lease;
  fields: ReadonlyArray<string | null>;
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

export function createMonitor(options: MonitorOptions): Monitor {
  const { redis, prefix } = options;
  const detectors: DetectorConfig = { ...DEFAULT_DETECTOR_CONFIG, ...options.detectors };
  const limits: RollingLimits = {
    ...DEFAULT_ROLLING_LIMITS,
    plateauMinImprovement: detectors.plateauMinImprovement,
    ...options.limits,
  };
  const maxBytes = options.maxBytesPerTick ?? DEFAULT_MAX_BYTES_PER_READ;
  const clock = options.clock ?? Date.now;
  const printedMetrics = createPrintedMetricsReader(
    definedOnly({ pattern: options.metricPattern, logger: options.logger }),
  );
  const leases = createLeases(redis);
  const stateKey = (runId: string) => `${prefix}:monitor:${runId}`;
  const outboxKey = (runId: string) => `${prefix}:monitor-outbox:${runId}`;
  const lockKey = (runId: string) => `${prefix}:monitor-lock:${runId}`;
  const cache = new Map<string, { revision: string; state: MonitorState }>();
  let revisionCounter = 0;

  async function loadState(runId: string): Promise<MonitorState> {
    return parseMonitorState(await redis.hget(stateKey(runId), 'state'));
  }

  /** The state (our cached copy when Redis holds the revision we wrote), cursors from `STATE_FIELDS`. */
  async function readState(runId: string, fields: ReadonlyArray<string | null>) {
    const [metricsCursor, logCursor, alertsCursor, revision] = fields;
    // Reuse our own parsed copy when Redis still holds the revision we wrote (the usual case with one
    // worker); otherwise, e.g. after another worker ticked this run, read the state again.
    const cached = cache.get(runId);
    cache.delete(runId);
    const state =
      cached !== undefined && revision !== null && revision !== undefined && cached.revision === revision
        ? cached.state
        : await loadState(runId);
    return {
      state,
      metricsCursor: parseCursor(metricsCursor ?? null),
      logCursor: parseCursor(logCursor ?? null),
      alertsCursor: parseCursor(alertsCursor ?? null),
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
    fields: ReadonlyArray<string | null>,
  ): Promise<TickInputs> {
    const { state, metricsCursor, logCursor, alertsCursor } = await readState(runId, fields);
    const runDir = options.runDir(meta);
    const logPath = join(runDir, RUN_FILES.output);
    const policy = await options.policy?.load(runId);
    const metricsChunk = await readNewLines(join(runDir, RUN_FILES.metrics), metricsCursor, maxBytes);
    const logChunk = await readNewLines(logPath, logCursor, maxBytes, { carriageReturns: true });
    const alertsChunk = await readNewLines(join(runDir, RUN_FILES.alerts), alertsCursor, maxBytes);
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
    const scriptAlertLines = alertsChunk.lines;
    const context = {
      meta,
      runId,
      detectors,
      limits,
      printedMetrics,
      policy,
      gpu,
      crashLogTail,
      scriptAlertLines,
      trackerLinks: options.trackerLinks ?? true,
      eventPoints: events.points,
    };
    return { state, metricsChunk, logChunk, alertsChunk, eventsMore: events.more, context };
  }

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
    const transaction = redis.multi();
    const newRevision = `${process.pid}.${++revisionCounter}.${held.now}`;
    const fields: Record<string, string> = { state: serialiseMonitorState(state), rev: newRevision };
    if (metricsChunk.cursor !== undefined) fields['cursor:metrics'] = JSON.stringify(metricsChunk.cursor);
    if (logChunk.cursor !== undefined) fields['cursor:log'] = JSON.stringify(logChunk.cursor);
    if (alertsChunk.cursor !== undefined) fields['cursor:alerts'] = JSON.stringify(alertsChunk.cursor);
    transaction.hset(stateKey(runId), fields);
    // A run retired with a TTL (paused, failed) that ticks again keeps its state for good.
    transaction.persist(stateKey(runId));
    for (const incident of evaluation.incidents)
      transaction.hset(outboxKey(runId), incident.id, JSON.stringify(incident));
    transaction.persist(outboxKey(runId));
    transaction.hgetall(outboxKey(runId));
    held.lease.releaseIn(transaction);
    const results = await transaction.exec();
    held.released = true;
    cache.set(runId, { revision: newRevision, state });
    if (cache.size > MAX_CACHED_RUNS) {
      const oldest = cache.keys().next().value;
      if (oldest !== undefined) cache.delete(oldest);
    }
    const incidents = parseOutbox((results?.at(-2)?.[1] ?? {}) as Record<string, string>);
    if (incidents.length > MAX_OUTBOX) {
      // An adapter down for a long time must not make the outbox grow without bound: drop the oldest.
      const dropped = incidents.splice(0, incidents.length - MAX_OUTBOX);
      await redis.hdel(outboxKey(runId), ...dropped.map((incident) => incident.id));
    }
    return incidents;
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
    const inputs = await readInputs(runId, meta, processState, held.fields);
    const { state, metricsChunk, logChunk } = inputs;
    const evaluation = evaluate(state, metricsChunk, logChunk, processState, now, inputs.context);
    logEvaluation(options.logger, runId, evaluation);
    if (evaluation.dumpStacks) await askForStacks(meta, state);
    await printedMetrics.writeDerived(state, options.runDir(meta), evaluation.derivedText);
    if (evaluation.linksFound && state.links !== undefined)
      await writeTrackerLinks(options.runDir(meta), state.links);
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
      // Try once: a tick already running for this run does the work; this one is skipped. No renewal,
      // so a tick that hangs loses the lease after TICK_LEASE_MS and later ticks go on. The lease comes
      // with the cursors (one round trip) and goes with the commit (one more).
      const taken = await leases.tryAcquireReading(
        lockKey(runId),
        TICK_LEASE_MS,
        stateKey(runId),
        STATE_FIELDS,
      );
      if (taken === undefined) return { ...SKIPPED_TICK };
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

    async series(runId, metrics) {
      const state = await loadState(runId);
      const names = metrics ?? Object.keys(state.rolling.metrics);
      const output: Record<string, Array<{ step: number; value: number }>> = {};
      for (const name of names)
        if (state.rolling.metrics[name] !== undefined) output[name] = chartSeries(state.rolling, name);
      return output;
    },

    async snapshot(input) {
      const state = await loadState(input.meta.id);
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
      await redis.del(stateKey(runId), outboxKey(runId), lockKey(runId));
    },

    async retire(runId, keepMs) {
      cache.delete(runId);
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
