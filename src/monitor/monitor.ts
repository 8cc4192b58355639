import { join } from 'node:path';
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import type { ProcessState } from '../runs/executor.js';
import type { RunMeta } from '../runs/run-types.js';
import type { AlertPolicy } from './alert-policy.js';
import { isMuted } from './alert-policy.js';
import { detectCrash } from './detectors/crash.js';
import { formatDuration, formatMetricValue, isCleanFinish, summariseMetrics } from './detectors/finished.js';
import { checkDivergence, checkSpike } from './detectors/loss-detectors.js';
import { describeNonFinite, nonFiniteMetrics } from './detectors/non-finite.js';
import { checkPlateau, plateauSuggestion } from './detectors/plateau.js';
import { checkStall } from './detectors/stall.js';
import { episodeCount, isEpisodeActive, observeEpisode, rearmEpisodes } from './episodes.js';
import type { GpuProbe } from './gpu-probe.js';
import { type MetricPoint, recordMalformed } from './metric-line.js';
import {
  createMonitorState,
  LOG_TAIL_CHARS,
  type MonitorState,
  parseMonitorState,
  serialiseMonitorState,
} from './monitor-state.js';
import { createPrintedMetricsReader, metricsSourceOf, plannedStepsOf } from './printed-metrics.js';
import { redactedTail, redactSecrets } from './redact.js';
import { isLossMetric } from './robust.js';
import {
  addPoint,
  chartSeries,
  DEFAULT_ROLLING_LIMITS,
  medianStepIntervalMs,
  type RollingLimits,
} from './rolling-stats.js';
import { plannedMaxSteps } from './run-plan.js';
import { DEFAULT_MAX_BYTES_PER_READ, parseCursor, readFileTail, readNewLines } from './tail-reader.js';
import { createExtrasState, runTickExtras } from './tick-extras.js';
import { buildTriageSnapshot, type TriageSnapshot } from './triage-snapshot.js';
import { DEFAULT_DETECTOR_CONFIG, type DetectorConfig, type Incident, type IncidentKind } from './types.js';

/**
 * The monitor: one `tick` per run reads what is new in `metrics.jsonl` and `output.log`, updates the bounded
 * rolling statistics, runs the cheap detectors and returns the incidents whose episode just began. It never
 * calls an LLM. State, file cursors and undelivered incidents live in Redis, so a worker restart neither
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
}

const LOCK_MS = 60_000;
const CRASH_LOG_BYTES = 64 * 1024;
const MAX_OUTBOX = 50;
/** Parsed states kept in memory between ticks (a few tens of KiB each). */
const MAX_CACHED_RUNS = 2000;

const SEVERITY: Record<IncidentKind, Incident['severity']> = {
  crash: 'critical',
  nan: 'critical',
  spike: 'warning',
  divergence: 'warning',
  stall: 'warning',
  plateau: 'info',
  finished: 'info',
  overfitting: 'warning',
  throughput: 'warning',
  grad_norm: 'warning',
  idle_gpu: 'warning',
  rule: 'warning',
};

export function createMonitor(options: MonitorOptions) {
  const { redis, prefix } = options;
  const detectors: DetectorConfig = { ...DEFAULT_DETECTOR_CONFIG, ...options.detectors };
  const limits: RollingLimits = {
    ...DEFAULT_ROLLING_LIMITS,
    plateauMinImprovement: detectors.plateauMinImprovement,
    ...options.limits,
  };
  const maxBytes = options.maxBytesPerTick ?? DEFAULT_MAX_BYTES_PER_READ;
  const clock = options.clock ?? Date.now;
  const printedMetrics = createPrintedMetricsReader({
    ...(options.metricPattern === undefined ? {} : { pattern: options.metricPattern }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
  });
  const stateKey = (runId: string) => `${prefix}:monitor:${runId}`;
  const outboxKey = (runId: string) => `${prefix}:monitor-outbox:${runId}`;
  const lockKey = (runId: string) => `${prefix}:monitor-lock:${runId}`;
  const cache = new Map<string, { revision: string; state: MonitorState }>();
  let revisionCounter = 0;

  async function loadState(runId: string): Promise<MonitorState> {
    return parseMonitorState(await redis.hget(stateKey(runId), 'state'));
  }

  async function tickLocked(runId: string, meta: RunMeta, processState: ProcessState): Promise<TickResult> {
    const now = clock();
    const [metricsCursorRaw, logCursorRaw, revision] = await redis.hmget(
      stateKey(runId),
      'cursor:metrics',
      'cursor:log',
      'rev',
    );
    // Reuse our own parsed copy when Redis still holds the revision we wrote (the usual case with one
    // worker); otherwise, e.g. after another worker ticked this run, read the state again.
    const cached = cache.get(runId);
    cache.delete(runId);
    const state =
      cached !== undefined && revision !== null && cached.revision === revision
        ? cached.state
        : parseMonitorState(await redis.hget(stateKey(runId), 'state'));
    state.ticks++;
    state.firstTickAt ??= now;
    const runDir = options.runDir(meta);
    const metricsPath = join(runDir, 'metrics.jsonl');
    const logPath = join(runDir, 'output.log');
    let fresh: Incident[] = [];
    const policy = await options.policy?.load(runId);
    const accepted: Array<MetricPoint & { step: number }> = [];
    const raise = (
      kind: IncidentKind,
      key: string,
      fields: Omit<Incident, 'id' | 'runId' | 'kind' | 'severity' | 'at'>,
    ) => {
      fresh.push({
        id: `${runId}:${key}#${episodeCount(state.episodes, key)}`,
        runId,
        kind,
        severity: SEVERITY[kind],
        at: now,
        launch: state.launch ?? meta.launchCount,
        ...fields,
      });
    };
    const launchStartedAt = meta.startedAt === undefined ? undefined : Date.parse(meta.startedAt);

    // --- metrics.jsonl ---------------------------------------------------------------------------
    const metricsChunk = await readNewLines(metricsPath, parseCursor(metricsCursorRaw), maxBytes);
    if (metricsChunk.reset) {
      // The file was replaced or truncated: its steps start over, so the windows would mix two histories.
      const episodes = state.episodes;
      const fresher = createMonitorState();
      state.rolling = fresher.rolling;
      state.episodes = episodes;
      delete state.extras;
      options.logger?.info(
        { runId },
        'metrics.jsonl was replaced or truncated; reading it again from the start',
      );
    }
    let malformedCount = metricsChunk.oversized;
    let firstReason: string | undefined =
      metricsChunk.oversized > 0 ? 'line longer than the read cap' : undefined;
    let sample: string | undefined;
    let newPoints = 0;

    // --- output.log (bounded tail, for triage snapshots; metrics when the run prints them) ----------
    const logChunk = await readNewLines(logPath, parseCursor(logCursorRaw), maxBytes, {
      carriageReturns: true,
    });
    if (logChunk.reset) state.logTail = '';
    if (logChunk.lines.length > 0) {
      // Redacted as it is kept, so the cut to the last few KiB never keeps a secret's tail.
      state.logTail = redactedTail(`${state.logTail}${logChunk.lines.join('\n')}\n`, LOG_TAIL_CHARS);
    }
    const incoming = await printedMetrics.collect({
      runId,
      runDir,
      state,
      helperLines: metricsChunk.lines,
      logLines: logChunk.lines,
      logReset: logChunk.reset,
    });
    for (const { line, parsed } of incoming.points) {
      if (!parsed.ok) {
        malformedCount++;
        firstReason ??= parsed.reason;
        sample ??= redactSecrets(line);
        continue;
      }
      const rolling = state.rolling;
      const step = parsed.point.step ?? (rolling.lastStep ?? -1) + 1;
      const point = { ...parsed.point, step };
      newPoints++;
      accepted.push(point);
      if (state.launch === undefined) state.launch = meta.launchCount;
      else if (
        state.launch !== meta.launchCount &&
        (point.ts === undefined || launchStartedAt === undefined || point.ts >= launchStartedAt)
      ) {
        // The first point of a new launch (lines the old process wrote before it ended still count as
        // the old launch): a NaN that persists after a fix is a new episode, so it alerts again.
        rearmEpisodes(state.episodes);
        state.launch = meta.launchCount;
      }

      const bad = nonFiniteMetrics(point.metrics);
      if (observeEpisode(state.episodes, 'nan', bad.length > 0, detectors.nanRecoveryPoints)) {
        const described = bad
          .slice(0, 4)
          .map((name) => `${name} became ${describeNonFinite(point.metrics[name] ?? Number.NaN)}`)
          .join(', ');
        raise('nan', 'nan', {
          title: `${meta.name}: non-finite metric at step ${step}`,
          summary: `${meta.name}: ${described} at step ${step}.`,
          metrics: bad.slice(0, 4),
          step,
          highlightSteps: [step, step],
        });
      }
      for (const [name, value] of Object.entries(point.metrics)) {
        if (!isLossMetric(name)) continue;
        const series = rolling.metrics[name];
        const verdict = checkSpike(series?.values ?? [], value, detectors);
        if (observeEpisode(state.episodes, `spike:${name}`, verdict.spike)) {
          raise('spike', `spike:${name}`, {
            title: `${meta.name}: ${name} spike at step ${step}`,
            summary: `${meta.name}: ${name} spiked to ${formatMetricValue(value)} at step ${step} (median ${formatMetricValue(verdict.median)} over the last ${detectors.spikeWindow} points).`,
            metrics: [name],
            step,
            highlightSteps: [step, step],
          });
        }
      }
      addPoint(rolling, point, now, limits);
    }
    const note = recordMalformed(state.malformed, malformedCount, firstReason, sample);
    if (malformedCount > 0) {
      options.logger?.warn(
        { runId, malformed: malformedCount, reason: firstReason },
        'malformed metric lines skipped',
      );
    }

    printedMetrics.applyProgress(state, incoming.progressStep, now, limits);

    // --- per-tick detectors ----------------------------------------------------------------------
    const rolling = state.rolling;
    for (const [name, series] of Object.entries(rolling.metrics)) {
      if (!isLossMetric(name)) continue;
      const divergence = checkDivergence(series.values, detectors);
      if (observeEpisode(state.episodes, `divergence:${name}`, divergence.diverging)) {
        const from = series.steps[Math.max(0, series.steps.length - detectors.divergenceWindow)] ?? 0;
        const lastStep = series.steps.at(-1) ?? 0;
        raise('divergence', `divergence:${name}`, {
          title: `${meta.name}: ${name} is diverging`,
          summary: `${meta.name}: ${name} is rising — ${formatMetricValue(divergence.from)} → ${formatMetricValue(divergence.to)} (+${Math.round(divergence.rise * 100)}%) over the last ${detectors.divergenceWindow} points (step ${lastStep}).`,
          metrics: [name],
          step: lastStep,
          highlightSteps: [from, lastStep],
        });
      }
      // A diverging or NaN loss is not also "plateaued": one alert for one problem.
      if (isEpisodeActive(state.episodes, `divergence:${name}`) || isEpisodeActive(state.episodes, 'nan'))
        continue;
      // At most `plateauMaxAlerts` plateau notes per run, whatever the metric.
      const plateausSoFar = Object.entries(state.episodes)
        .filter(([key]) => key.startsWith('plateau:'))
        .reduce((sum, [, episode]) => sum + episode.fired, 0);
      if (plateausSoFar >= detectors.plateauMaxAlerts && !isEpisodeActive(state.episodes, `plateau:${name}`))
        continue;
      const lastStep = rolling.lastStep ?? 0;
      const maxSteps = plannedMaxSteps(meta) ?? plannedStepsOf(state);
      const plateau = checkPlateau(
        {
          points: chartSeries(rolling, name),
          firstStep: rolling.firstStep ?? lastStep,
          lastStep,
          maxSteps,
          learningRate: learningRateSeries(rolling),
        },
        detectors,
      );
      if (observeEpisode(state.episodes, `plateau:${name}`, plateau.plateau)) {
        const fromStep = Math.round(plateau.fromStep ?? lastStep);
        raise('plateau', `plateau:${name}`, {
          title: `${meta.name}: ${name} has stopped improving`,
          summary: `${meta.name}: ${name} has stopped improving — over steps ${fromStep}–${lastStep} its trend promises at most ${formatPercent(plateau.bestCase)} improvement (robust slope, 99 % bound; now ${formatMetricValue(series.values.at(-1) ?? Number.NaN)}). ${plateauSuggestion(lastStep, maxSteps)}`,
          metrics: [name],
          step: lastStep,
          highlightSteps: [fromStep, lastStep],
        });
      }
    }

    const startedAt = meta.startedAt === undefined ? undefined : Date.parse(meta.startedAt);
    const stall = checkStall({
      state: processState,
      now,
      lastProgressAt: rolling.lastStepAt ?? state.firstTickAt,
      medianStepIntervalMs: medianStepIntervalMs(rolling),
      stallS: detectors.stallS,
    });
    if (observeEpisode(state.episodes, 'stall', stall.stalled)) {
      const lastStep = rolling.lastStep;
      raise('stall', 'stall', {
        title: `${meta.name}: no progress`,
        summary: `${meta.name}: no new step for ${formatDuration(stall.idleMs)}${lastStep === undefined ? '' : ` (last step ${lastStep})`}; the process is still alive.`,
        metrics: lossMetricNames(state).slice(0, 2),
        ...(lastStep === undefined ? {} : { step: lastStep }),
      });
    }

    // --- grad norm, throughput, overfitting, idle GPUs, people's rules (tick-extras.ts) ------------
    state.extras ??= createExtrasState();
    const extraRaises = await runTickExtras({
      extras: state.extras,
      episodes: state.episodes,
      meta,
      points: accepted,
      lastStep: rolling.lastStep,
      lastMetrics: rolling.lastMetrics,
      lossMetrics: lossMetricNames(state),
      now,
      processState,
      backlog: metricsChunk.more,
      settings: detectors,
      policy,
      gpuProbe: options.gpuProbe,
    });
    for (const item of extraRaises) raise(item.kind, item.key, item.fields);

    // --- process end (only once the metrics are drained, so the summary is final) -----------------
    if (
      (processState.kind === 'exited' || processState.kind === 'signaled') &&
      !metricsChunk.more &&
      !logChunk.more
    ) {
      const launch = meta.launchCount;
      const durationMs =
        (meta.endedAt === undefined ? now : Date.parse(meta.endedAt)) - (startedAt ?? state.firstTickAt);
      const stepText = rolling.lastStep === undefined ? '' : ` at step ${rolling.lastStep}`;
      if (isCleanFinish(processState)) {
        if (observeEpisode(state.episodes, `finished:${launch}`, true)) {
          const summary = summariseMetrics(rolling.lastMetrics);
          raise('finished', `finished:${launch}`, {
            title: `${meta.name} finished`,
            summary: `${meta.name} finished in ${formatDuration(durationMs)}${stepText}${summary === '' ? '.' : ` — ${summary}.`}`,
            metrics: lossMetricNames(state).slice(0, 2),
            ...(rolling.lastStep === undefined ? {} : { step: rolling.lastStep }),
            exitCode: 0,
          });
        }
      } else if (!isEpisodeActive(state.episodes, `crash:${launch}`)) {
        const crash = detectCrash(meta, processState, await readFileTail(logPath, CRASH_LOG_BYTES));
        if (crash !== undefined && observeEpisode(state.episodes, `crash:${launch}`, true)) {
          const how = crash.signal === undefined ? `exit ${crash.exitCode}` : `signal ${crash.signal}`;
          raise('crash', `crash:${launch}`, {
            title: `${meta.name} failed`,
            summary: `${meta.name} failed (${how})${stepText} — ${crash.label}.`,
            metrics: lossMetricNames(state).slice(0, 2),
            ...(rolling.lastStep === undefined ? {} : { step: rolling.lastStep }),
            // The launch whose exit this is, even when none of its metric lines has been read yet.
            launch,
            traceback: crash.traceback,
            crashClass: crash.crashClass,
            ...(crash.exitCode === undefined ? {} : { exitCode: crash.exitCode }),
            ...(crash.signal === undefined ? {} : { signal: crash.signal }),
          });
        }
      }
    }

    // A muted detector's episodes still run (so unmuting does not replay an old episode); nothing is said.
    fresh = fresh.filter((incident) => !isMuted(policy, incident.kind, now));

    // --- commit: cursors, state and new incidents move together -------------------------------------
    const transaction = redis.multi();
    const newRevision = `${process.pid}.${++revisionCounter}.${now}`;
    const fields: Record<string, string> = { state: serialiseMonitorState(state), rev: newRevision };
    if (metricsChunk.cursor !== undefined) fields['cursor:metrics'] = JSON.stringify(metricsChunk.cursor);
    if (logChunk.cursor !== undefined) fields['cursor:log'] = JSON.stringify(logChunk.cursor);
    transaction.hset(stateKey(runId), fields);
    for (const incident of fresh) transaction.hset(outboxKey(runId), incident.id, JSON.stringify(incident));
    transaction.hgetall(outboxKey(runId));
    const results = await transaction.exec();
    cache.set(runId, { revision: newRevision, state });
    if (cache.size > MAX_CACHED_RUNS) {
      const oldest = cache.keys().next().value;
      if (oldest !== undefined) cache.delete(oldest);
    }
    const outboxRaw = (results?.at(-1)?.[1] ?? {}) as Record<string, string>;
    const incidents = parseOutbox(outboxRaw);
    if (incidents.length > MAX_OUTBOX) {
      // An adapter down for a long time must not make the outbox grow without bound: drop the oldest.
      const dropped = incidents.splice(0, incidents.length - MAX_OUTBOX);
      await redis.hdel(outboxKey(runId), ...dropped.map((incident) => incident.id));
    }
    for (const incident of fresh) options.logger?.info({ runId, incident: incident.id }, incident.summary);

    const malformed: TickResult['malformed'] = { count: malformedCount };
    if (note !== undefined) malformed.note = note;
    const progress: TickResult['progress'] = {
      points: rolling.points,
      lastMetrics: { ...rolling.lastMetrics },
    };
    if (rolling.lastStep !== undefined) progress.lastStep = rolling.lastStep;
    return { incidents, newPoints, malformed, progress, backlog: metricsChunk.more || logChunk.more };
  }

  return {
    /**
     * One monitor tick for a run. Returns the incidents to deliver; call `ack` with their ids once posted.
     * Concurrent ticks of the same run are serialised by a Redis lock (the loser is skipped).
     */
    async tick(runId: string, meta: RunMeta, processState: ProcessState): Promise<TickResult> {
      const token = `${process.pid}-${Math.random().toString(36).slice(2)}`;
      const locked = await redis.set(lockKey(runId), token, 'PX', LOCK_MS, 'NX');
      if (locked === null) {
        return {
          incidents: [],
          newPoints: 0,
          malformed: { count: 0 },
          progress: { points: 0, lastMetrics: {} },
          backlog: false,
          skipped: true,
        };
      }
      try {
        return await tickLocked(runId, meta, processState);
      } finally {
        // Release only our own lock (it may have expired and been taken by another tick).
        await redis.eval(
          "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
          1,
          lockKey(runId),
          token,
        );
      }
    },

    /** Mark incidents as delivered so later ticks stop returning them. */
    async ack(runId: string, incidentIds: string[]): Promise<void> {
      if (incidentIds.length > 0) await redis.hdel(outboxKey(runId), ...incidentIds);
    },

    /** Chart series (downsampled history + recent window) for the given metrics, or all tracked ones. */
    async series(
      runId: string,
      metrics?: string[],
    ): Promise<Record<string, Array<{ step: number; value: number }>>> {
      const state = await loadState(runId);
      const names = metrics ?? Object.keys(state.rolling.metrics);
      const output: Record<string, Array<{ step: number; value: number }>> = {};
      for (const name of names)
        if (state.rolling.metrics[name] !== undefined) output[name] = chartSeries(state.rolling, name);
      return output;
    },

    /** A compact, bounded snapshot for LLM triage (never called by the monitor itself). */
    async snapshot(input: {
      meta: RunMeta;
      processState: ProcessState;
      script?: string;
      incident?: Incident;
    }): Promise<TriageSnapshot> {
      const state = await loadState(input.meta.id);
      let logTail = state.logTail;
      if (input.processState.kind === 'exited' || input.processState.kind === 'signaled') {
        logTail = await readFileTail(join(options.runDir(input.meta), 'output.log'), CRASH_LOG_BYTES);
      }
      const snapshot = buildTriageSnapshot({ ...input, rolling: state.rolling, logTail, now: clock() });
      if (metricsSourceOf(state) === 'stdout') snapshot.metricsSource = 'stdout';
      return snapshot;
    },

    /** The raw persisted state (tests, debugging). */
    loadState,

    /** Delete everything the monitor keeps for a run (after it ended and its last tick ran). */
    async forget(runId: string): Promise<void> {
      cache.delete(runId);
      await redis.del(stateKey(runId), outboxKey(runId), lockKey(runId));
    },
  };
}

export type Monitor = ReturnType<typeof createMonitor>;

const LEARNING_RATE = /^(?:.*[_/])?(?:lr|learning_rate)$/i;

function learningRateSeries(rolling: MonitorState['rolling']) {
  const name = Object.keys(rolling.metrics).find((metric) => LEARNING_RATE.test(metric));
  return name === undefined ? undefined : chartSeries(rolling, name);
}

function formatPercent(fraction: number | undefined): string {
  if (fraction === undefined || !Number.isFinite(fraction)) return '?';
  return `${Math.max(0, fraction * 100).toFixed(fraction < 0.001 ? 2 : 1)} %`;
}

function lossMetricNames(state: MonitorState): string[] {
  return Object.keys(state.rolling.metrics).filter(isLossMetric);
}

function parseOutbox(raw: Record<string, string>): Incident[] {
  const incidents: Incident[] = [];
  for (const value of Object.values(raw)) {
    try {
      const incident = JSON.parse(value) as Incident;
      if (typeof incident.id === 'string' && typeof incident.kind === 'string') incidents.push(incident);
    } catch {
      // a corrupt entry is dropped rather than blocking delivery of the others
    }
  }
  return incidents.sort((a, b) => a.at - b.at || a.id.localeCompare(b.id));
}
