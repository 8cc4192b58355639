import { redactedTail, redactSecrets } from '../redact.js';
import type { ProcessState } from '../runs/executor.js';
import { type MetricPoint, recordMalformed } from '../runs/metric-line.js';
import type { RunMeta } from '../runs/run-types.js';
import { type AlertPolicy, isMuted } from './alert-policy.js';
import { detectCrash } from './detectors/crash.js';
import { isCleanFinish, summariseMetrics } from './detectors/finished.js';
import { checkDivergence, checkSpike } from './detectors/loss-detectors.js';
import { describeNonFinite, nonFiniteMetrics } from './detectors/non-finite.js';
import { checkPlateau } from './detectors/plateau.js';
import { isLossMetric } from './detectors/robust.js';
import { checkStall } from './detectors/stall.js';
import { episodeCount, isEpisodeActive, observeEpisode, rearmEpisodes } from './episodes.js';
import {
  crashText,
  divergenceText,
  finishedText,
  type IncidentText,
  nanText,
  plateauText,
  spikeText,
  stallText,
} from './incident-text.js';
import { createMonitorState, LOG_TAIL_CHARS, type MonitorState } from './monitor-state.js';
import { type createPrintedMetricsReader, plannedStepsOf } from './printed-metrics.js';
import { addPoint, chartSeries, medianStepIntervalMs, type RollingLimits } from './rolling-stats.js';
import { plannedMaxSteps } from './run-plan.js';
import { createExtrasState, runTickExtras } from './tick-extras.js';
import type { DetectorConfig, Incident, IncidentKind } from './types.js';

/**
 * One monitor tick as a function of its inputs: the state, the lines new since the last tick, the
 * process state and the clock. No Redis, no files, no clock of its own: the shell (monitor.ts) reads the
 * cursors and files, calls this, and commits what it returns. For speed the state is updated in place and
 * returned (a state is tens of KiB and the shell caches it between ticks); pass a copy to keep the old one.
 */

export interface NewLines {
  lines: readonly string[];
  /** The file was replaced or truncated since the last tick: its history starts over. */
  reset: boolean;
  /** More data waits beyond the per-tick read cap. */
  more: boolean;
  /** Lines skipped for being longer than the read cap. */
  oversized?: number;
}

export interface TickContext {
  meta: RunMeta;
  /** The run's id as the tick was asked for (defaults to `meta.id`). */
  runId?: string;
  detectors: DetectorConfig;
  limits: RollingLimits;
  printedMetrics: ReturnType<typeof createPrintedMetricsReader>;
  /** People's rules and mutes of the run; absent = none. */
  policy?: AlertPolicy | undefined;
  /** GPU utilisation the shell probed this tick; absent = the idle-GPU detector is off. */
  gpu?: { utilisation: number[] | undefined } | undefined;
  /** The last bytes of output.log, read by the shell when `needsCrashLog` said so. */
  crashLogTail?: string | undefined;
}

interface Evaluation {
  state: MonitorState;
  /** The incidents whose episode began this tick (muted kinds left out). */
  incidents: Incident[];
  newPoints: number;
  malformed: { count: number; firstReason?: string; note?: string };
  /** Lines derived from output.log for the run's derived metrics file (printed-metrics.ts). */
  derivedText?: string;
  /** metrics.jsonl started over: the rolling windows were reset. */
  metricsReset: boolean;
}

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

const ended = (state: ProcessState) => state.kind === 'exited' || state.kind === 'signaled';

/** Whether this tick may raise a crash and so needs output.log's tail (the shell reads it). */
export function needsCrashLog(
  state: MonitorState,
  meta: RunMeta,
  processState: ProcessState,
  metrics: Pick<NewLines, 'more'>,
  log: Pick<NewLines, 'more'>,
): boolean {
  return (
    ended(processState) &&
    !metrics.more &&
    !log.more &&
    !isCleanFinish(processState) &&
    !isEpisodeActive(state.episodes, `crash:${meta.launchCount}`)
  );
}

export function evaluate(
  state: MonitorState,
  metrics: NewLines,
  log: NewLines,
  processState: ProcessState,
  now: number,
  context: TickContext,
): Evaluation {
  const { meta, detectors } = context;
  const runId = context.runId ?? meta.id;
  state.ticks++;
  state.firstTickAt ??= now;
  const fresh: Incident[] = [];
  const raise = (kind: IncidentKind, key: string, fields: IncidentText) => {
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

  if (metrics.reset) {
    // The file was replaced or truncated: its steps start over, so the windows would mix two histories.
    state.rolling = createMonitorState().rolling;
    delete state.extras;
  }
  if (log.reset) state.logTail = '';
  if (log.lines.length > 0) {
    // Redacted as it is kept, so the cut to the last few KiB never keeps a secret's tail.
    state.logTail = redactedTail(`${state.logTail}${log.lines.join('\n')}\n`, LOG_TAIL_CHARS);
  }
  const incoming = context.printedMetrics.collect({
    runId,
    state,
    helperLines: metrics.lines,
    logLines: log.lines,
    logReset: log.reset,
  });

  const oversized = metrics.oversized ?? 0;
  let malformedCount = oversized;
  let firstReason: string | undefined = oversized > 0 ? 'line longer than the read cap' : undefined;
  let sample: string | undefined;
  const accepted: Array<MetricPoint & { step: number }> = [];
  for (const { line, parsed } of incoming.points) {
    if (!parsed.ok) {
      malformedCount++;
      firstReason ??= parsed.reason;
      sample ??= redactSecrets(line);
      continue;
    }
    const step = parsed.point.step ?? (state.rolling.lastStep ?? -1) + 1;
    const point = { ...parsed.point, step };
    accepted.push(point);
    observePoint(state, point, now, context, raise);
  }
  const note = recordMalformed(state.malformed, malformedCount, firstReason, sample);
  context.printedMetrics.applyProgress(state, incoming.progressStep, now, context.limits);

  observeTrends(state, context, raise);
  observeStall(state, processState, now, context, raise);

  // --- grad norm, throughput, overfitting, idle GPUs, people's rules (tick-extras.ts) ------------
  state.extras ??= createExtrasState();
  const extraRaises = runTickExtras({
    extras: state.extras,
    episodes: state.episodes,
    meta,
    points: accepted,
    lastStep: state.rolling.lastStep,
    lastMetrics: state.rolling.lastMetrics,
    lossMetrics: lossMetricNames(state),
    now,
    processState,
    backlog: metrics.more,
    settings: detectors,
    policy: context.policy,
    gpu: context.gpu,
  });
  for (const item of extraRaises) raise(item.kind, item.key, item.fields);

  // --- process end (only once the metrics are drained, so the summary is final) -----------------
  if (ended(processState) && !metrics.more && !log.more) observeEnd(state, processState, now, context, raise);

  const malformed: Evaluation['malformed'] = { count: malformedCount };
  if (firstReason !== undefined) malformed.firstReason = firstReason;
  if (note !== undefined) malformed.note = note;
  const evaluation: Evaluation = {
    state,
    // A muted detector's episodes still run (so unmuting does not replay an old episode); nothing is said.
    incidents: fresh.filter((incident) => !isMuted(context.policy, incident.kind, now)),
    newPoints: accepted.length,
    malformed,
    metricsReset: metrics.reset,
  };
  if (incoming.derivedText !== undefined) evaluation.derivedText = incoming.derivedText;
  return evaluation;
}

type Raise = (kind: IncidentKind, key: string, fields: IncidentText) => void;

/** Per point: launch re-arming, non-finite values and loss spikes, then the point joins the windows. */
function observePoint(
  state: MonitorState,
  point: MetricPoint & { step: number },
  now: number,
  context: TickContext,
  raise: Raise,
): void {
  const { meta, detectors } = context;
  const { step } = point;
  const launchStartedAt = meta.startedAt === undefined ? undefined : Date.parse(meta.startedAt);
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
    raise('nan', 'nan', nanText(meta.name, step, described, bad.slice(0, 4)));
  }
  for (const [name, value] of Object.entries(point.metrics)) {
    if (!isLossMetric(name)) continue;
    const verdict = checkSpike(state.rolling.metrics[name]?.values ?? [], value, detectors);
    if (observeEpisode(state.episodes, `spike:${name}`, verdict.spike)) {
      raise(
        'spike',
        `spike:${name}`,
        spikeText(meta.name, name, step, value, verdict.median, detectors.spikeWindow),
      );
    }
  }
  addPoint(state.rolling, point, now, context.limits);
}

/** Per tick, per loss metric: divergence, then plateau (never both for one problem). */
function observeTrends(state: MonitorState, context: TickContext, raise: Raise): void {
  const { meta, detectors } = context;
  const rolling = state.rolling;
  for (const [name, series] of Object.entries(rolling.metrics)) {
    if (!isLossMetric(name)) continue;
    const divergence = checkDivergence(series.values, detectors);
    if (observeEpisode(state.episodes, `divergence:${name}`, divergence.diverging)) {
      const from = series.steps[Math.max(0, series.steps.length - detectors.divergenceWindow)] ?? 0;
      const lastStep = series.steps.at(-1) ?? 0;
      raise(
        'divergence',
        `divergence:${name}`,
        divergenceText(meta.name, name, divergence, detectors.divergenceWindow, from, lastStep),
      );
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
      const now = series.values.at(-1) ?? Number.NaN;
      raise(
        'plateau',
        `plateau:${name}`,
        plateauText(meta.name, name, { bestCase: plateau.bestCase, now }, fromStep, lastStep, maxSteps),
      );
    }
  }
}

function observeStall(
  state: MonitorState,
  processState: ProcessState,
  now: number,
  context: TickContext,
  raise: Raise,
): void {
  const rolling = state.rolling;
  const stall = checkStall({
    state: processState,
    now,
    lastProgressAt: rolling.lastStepAt ?? state.firstTickAt,
    medianStepIntervalMs: medianStepIntervalMs(rolling),
    stallS: context.detectors.stallS,
  });
  if (observeEpisode(state.episodes, 'stall', stall.stalled)) {
    raise(
      'stall',
      'stall',
      stallText(context.meta.name, stall.idleMs, rolling.lastStep, lossMetricNames(state).slice(0, 2)),
    );
  }
}

/** The process ended: a clean finish is summarised once per launch; anything else is a crash. */
function observeEnd(
  state: MonitorState,
  processState: ProcessState,
  now: number,
  context: TickContext,
  raise: Raise,
): void {
  const { meta } = context;
  const rolling = state.rolling;
  const launch = meta.launchCount;
  const metrics = lossMetricNames(state).slice(0, 2);
  if (isCleanFinish(processState)) {
    if (observeEpisode(state.episodes, `finished:${launch}`, true)) {
      const startedAt = meta.startedAt === undefined ? undefined : Date.parse(meta.startedAt);
      const durationMs =
        (meta.endedAt === undefined ? now : Date.parse(meta.endedAt)) -
        (startedAt ?? state.firstTickAt ?? now);
      const summary = summariseMetrics(rolling.lastMetrics);
      raise(
        'finished',
        `finished:${launch}`,
        finishedText(meta.name, durationMs, rolling.lastStep, summary, metrics),
      );
    }
  } else if (!isEpisodeActive(state.episodes, `crash:${launch}`)) {
    const crash = detectCrash(meta, processState, context.crashLogTail ?? '');
    if (crash !== undefined && observeEpisode(state.episodes, `crash:${launch}`, true)) {
      raise('crash', `crash:${launch}`, crashText(meta.name, crash, rolling.lastStep, metrics, launch));
    }
  }
}

const LEARNING_RATE = /^(?:.*[_/])?(?:lr|learning_rate)$/i;

function learningRateSeries(rolling: MonitorState['rolling']) {
  const name = Object.keys(rolling.metrics).find((metric) => LEARNING_RATE.test(metric));
  return name === undefined ? undefined : chartSeries(rolling, name);
}

function lossMetricNames(state: MonitorState): string[] {
  return Object.keys(state.rolling.metrics).filter(isLossMetric);
}
