import type { ProcessState } from '../runs/executor.js';
import type { MetricPoint } from '../runs/metric-line.js';
import { isLaunched } from '../runs/records/run-types.js';
import { type BandWindow, createBandWindow } from './detectors/band-window.js';
import { detectCrash } from './detectors/crash.js';
import { isCleanFinish, summariseMetrics } from './detectors/finished.js';
import { checkDivergence, checkSpike } from './detectors/loss-detectors.js';
import { describeNonFinite, nonFiniteMetrics } from './detectors/non-finite.js';
import { checkPlateau } from './detectors/plateau.js';
import { isLossMetric, type RobustBand } from './detectors/robust.js';
import { isEpisodeActive, observeEpisode, rearmEpisodes } from './episodes.js';
import {
  crashText,
  divergenceText,
  evalFailedText,
  finishedText,
  type IncidentText,
  nanText,
  plateauText,
  spikeText,
} from './incident-text.js';
import type { MonitorState } from './monitor-state.js';
import { plannedStepsOf } from './printed-metrics.js';
import { addPoint, visitChartSeries } from './rolling-stats.js';
import { plannedMaxSteps } from './run-plan.js';
import type { TickContext } from './tick-context.js';
import type { IncidentKind, IncidentSeverity } from './types.js';

/**
 * The detector steps of one tick (evaluate.ts runs them in order): each reads the state, advances its
 * episodes and calls `raise` when an episode begins. No I/O.
 */

/** Raise an incident; `severity` overrides the kind's default (a script alert's level). */
export type Raise = (
  kind: IncidentKind,
  key: string,
  fields: IncidentText,
  severity?: IncidentSeverity,
) => void;
export type AcceptedPoint = MetricPoint & { step: number };

type Series = MonitorState['rolling']['metrics'][string];

/**
 * The spike bands per loss series (band-window.ts), kept between ticks: a window follows its series by the
 * series' point count, so one sort serves every later point (a woken evaluation sees one point at a time);
 * anything else, such as a state read again from Redis (new series objects), rebuilds it.
 */
const spikeWindows = new WeakMap<Series, { count: number; seen: number; window: BandWindow }>();

function spikeBand(series: Series, count: number): RobustBand {
  const entry = spikeWindows.get(series);
  if (entry !== undefined && entry.count === count) {
    if (series.count === entry.seen + 1) {
      entry.window.push(series.values.at(-1) as number);
      entry.seen = series.count;
    }
    if (series.count === entry.seen) return entry.window.band();
  }
  const window = createBandWindow(series.values, count);
  spikeWindows.set(series, { count, seen: series.count, window });
  return window.band();
}

/** Per point: launch re-arming, non-finite values and loss spikes, then the point joins the windows. */
export function observePoint(
  state: MonitorState,
  point: AcceptedPoint,
  now: number,
  context: TickContext,
  raise: Raise,
): void {
  const { meta, detectors } = context;
  const { step } = point;
  if (state.launch === undefined) state.launch = meta.launchCount;
  else if (
    // Launches only count up: an evaluation on an older record of the run (a woken evaluation's cached
    // meta, a tick that read it before a relaunch) must not move the state back and re-arm it again.
    state.launch < meta.launchCount &&
    (point.ts === undefined || meta.startedAt === undefined || point.ts >= Date.parse(meta.startedAt))
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
    const series = state.rolling.metrics[name];
    const verdict =
      series === undefined
        ? checkSpike([], value, detectors)
        : checkSpike(series.values, value, detectors, spikeBand(series, detectors.spikeWindow));
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
export function observeTrends(state: MonitorState, context: TickContext, raise: Raise): void {
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
    // A plateau is judged over minutes: the timer's tick does it, not each wake-up.
    if (context.woken === true) continue;
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
        // Built only when the window is judged, and only from its first step on.
        // A method, not a named arrow: tsx wraps those to keep their name, on every tick.
        points(fromStep, visit) {
          visitChartSeries(rolling, name, fromStep, visit);
        },
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

/** The process ended: a clean finish is summarised once per launch; anything else is a crash. */
export function observeEnd(
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
    // Shepherd ended it (stop, pause): a clean exit after its TERM (the helper's on_stop, or a batch script
    // or pod command stopped during its `--eval`, which exits with training's 0) is that ending, not a finish.
    if (meta.stopRequested !== undefined || meta.status === 'stopped' || meta.status === 'paused') return;
    // An evaluated run's ending is not recorded yet (its evaluation comes with it): the next tick reads it.
    if (isLaunched(meta.status) && meta.evalCommand !== undefined) return;
    if (meta.evaluation?.status === 'failed' && observeEpisode(state.episodes, `eval:${launch}`, true)) {
      raise(
        'eval_failed',
        `eval:${launch}`,
        evalFailedText(meta, context.crashLogTail ?? '', rolling.lastStep),
      );
    }
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
    const crash = detectCrash(meta, processState, context.crashLogTail ?? '', now);
    if (crash !== undefined && observeEpisode(state.episodes, `crash:${launch}`, true)) {
      raise('crash', `crash:${launch}`, crashText(meta.name, crash, rolling.lastStep, metrics, launch));
    }
  }
}

const LEARNING_RATE = /^(?:.*[_/])?(?:lr|learning_rate)$/i;

function learningRateSeries(rolling: MonitorState['rolling']) {
  const name = Object.keys(rolling.metrics).find((metric) => LEARNING_RATE.test(metric));
  return name === undefined
    ? undefined
    : (fromStep: number, visit: (step: number, value: number) => void) =>
        visitChartSeries(rolling, name, fromStep, visit);
}

export function lossMetricNames(state: MonitorState): string[] {
  return Object.keys(state.rolling.metrics).filter(isLossMetric);
}
