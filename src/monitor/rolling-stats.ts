import type { MetricPoint } from '../runs/metric-line.js';
import { median } from './detectors/robust.js';

/**
 * Bounded per-run statistics: for each metric a fixed-size window of the latest points (what the
 * detectors look at) and a downsampled history with a hard cap (what incident charts draw). Everything is
 * plain numbers so it serialises compactly to Redis and survives a worker restart.
 */

export interface SeriesState {
  /** Steps and values of the latest points, oldest first, at most `windowSize`. */
  steps: number[];
  values: number[];
  /**
   * Downsampled history, every `stride`-th point, compacted 2:1 when full: steps and values as two flat
   * arrays (a `[step, value]` pair costs ~70 bytes of heap, two flat numbers 16; with thousands of runs held
   * in memory the pairs were most of the heap). Written to Redis as pairs, as before.
   */
  historySteps: number[];
  historyValues: number[];
  stride: number;
  /** Points seen since the last history sample. */
  sinceSample: number;
  count: number;
  nonFinite: number;
  /** Plateau reference: best smoothed value so far and the step where it last improved meaningfully. */
  best?: number;
  bestStep?: number;
}

export interface RollingState {
  v: 1;
  metrics: Record<string, SeriesState>;
  points: number;
  firstStep?: number;
  lastStep?: number;
  /** Monitor clock (ms) when the step last advanced; what stall detection measures from. */
  lastStepAt?: number;
  /** Recent intervals (ms) between advancing steps, for the median step interval. */
  stepIntervals: number[];
  firstSeenAt?: number;
  lastMetrics: Record<string, number>;
}

export interface RollingLimits {
  windowSize: number;
  historyCap: number;
  maxMetrics: number;
  /** Relative improvement that resets the plateau reference. */
  plateauMinImprovement: number;
}

export const DEFAULT_ROLLING_LIMITS: RollingLimits = {
  windowSize: 500,
  historyCap: 1000,
  maxMetrics: 32,
  plateauMinImprovement: 0.01,
};

const MAX_STEP_INTERVALS = 64;

export function createRollingState(): RollingState {
  return { v: 1, metrics: {}, points: 0, stepIntervals: [], lastMetrics: {} };
}

function newSeries(): SeriesState {
  return {
    steps: [],
    values: [],
    historySteps: [],
    historyValues: [],
    stride: 1,
    sinceSample: 0,
    count: 0,
    nonFinite: 0,
  };
}

// Seven significant digits is plenty for alerting and charts and keeps the JSON small.
function compact(value: number): number {
  return Number.isFinite(value) ? Number(value.toPrecision(7)) : value;
}

/** Halve the history, keeping from each pair the non-finite point, else the larger value (loss spikes point
 *  up, so they survive compaction). */
function compactHistory(series: SeriesState): void {
  // New arrays, not edits in place: the serialised text kept for the old ones (historyTexts) goes with them.
  const steps: number[] = [];
  const values: number[] = [];
  const { historySteps, historyValues } = series;
  for (let index = 0; index < historySteps.length; index += 2) {
    const first = historyValues[index] as number;
    let keep = index;
    if (index + 1 < historySteps.length && Number.isFinite(first)) {
      const second = historyValues[index + 1] as number;
      if (!Number.isFinite(second) || !(first >= second)) keep = index + 1;
    }
    steps.push(historySteps[keep] as number);
    values.push(historyValues[keep] as number);
  }
  series.historySteps = steps;
  series.historyValues = values;
  series.stride *= 2;
}

/** Add one point (its step already assigned). `now` is the monitor clock in ms. */
export function addPoint(
  state: RollingState,
  point: MetricPoint & { step: number },
  now: number,
  limits: RollingLimits = DEFAULT_ROLLING_LIMITS,
): void {
  state.points++;
  state.firstSeenAt ??= now;
  state.firstStep ??= point.step;
  if (state.lastStep === undefined || point.step > state.lastStep) {
    if (state.lastStepAt !== undefined && state.lastStep !== undefined) {
      state.stepIntervals.push(Math.max(0, now - state.lastStepAt));
      if (state.stepIntervals.length > MAX_STEP_INTERVALS) state.stepIntervals.shift();
    }
    state.lastStep = point.step;
    state.lastStepAt = now;
  }
  for (const [name, raw] of Object.entries(point.metrics)) {
    let series = state.metrics[name];
    if (series === undefined) {
      if (Object.keys(state.metrics).length >= limits.maxMetrics) continue;
      series = newSeries();
      state.metrics[name] = series;
    }
    const value = compact(raw);
    state.lastMetrics[name] = value;
    series.count++;
    if (!Number.isFinite(value)) series.nonFinite++;
    series.steps.push(point.step);
    series.values.push(value);
    if (series.values.length > limits.windowSize) {
      series.steps.shift();
      series.values.shift();
    }
    series.sinceSample++;
    // Non-finite points always go into the history so charts can mark them.
    if (series.sinceSample >= series.stride || !Number.isFinite(value)) {
      series.historySteps.push(point.step);
      series.historyValues.push(value);
      series.sinceSample = 0;
      if (series.historySteps.length > limits.historyCap) compactHistory(series);
    }
    updatePlateauReference(series, point.step, limits.plateauMinImprovement);
  }
}

/** Smoothed (median of the last 5) value improves on the best by the minimum relative amount → reset. */
function updatePlateauReference(series: SeriesState, step: number, minImprovement: number): void {
  const smoothed = recentMedian(series.values);
  if (smoothed === undefined) return;
  if (series.best === undefined || series.bestStep === undefined) {
    series.best = smoothed;
    series.bestStep = step;
    return;
  }
  if (smoothed < series.best - Math.abs(series.best) * minImprovement) {
    series.best = smoothed;
    series.bestStep = step;
  }
}

/** `recent`: the finite ones of the last five values, sorted; reused, this runs for every metric of every point. */
const recent = new Float64Array(5);

/**
 * `median(values.slice(-5).filter(Number.isFinite))` without the copies: an insertion sort in the typed sort's
 * order (numeric, -0 before +0); undefined when none is finite.
 */
function recentMedian(values: readonly number[]): number | undefined {
  let size = 0;
  for (let index = Math.max(0, values.length - 5); index < values.length; index++) {
    const value = values[index] as number;
    if (!Number.isFinite(value)) continue;
    let at = size++;
    while (at > 0 && sortsAfter(recent[at - 1] as number, value)) {
      recent[at] = recent[at - 1] as number;
      at--;
    }
    recent[at] = value;
  }
  if (size === 0) return undefined;
  const middle = size >> 1;
  return size % 2 === 1
    ? (recent[middle] as number)
    : ((recent[middle - 1] as number) + (recent[middle] as number)) / 2;
}

function sortsAfter(left: number, right: number): boolean {
  return left > right || (left === 0 && right === 0 && 1 / left > 1 / right);
}

/** Median wall-clock interval between advancing steps, undefined before two steps were seen. */
export function medianStepIntervalMs(state: RollingState): number | undefined {
  return state.stepIntervals.length === 0 ? undefined : median(state.stepIntervals);
}

/**
 * Chart series from the stored history plus the window's newest points (step-sorted, de-duplicated); with
 * `fromStep`, only the points from that step on.
 */
export function chartSeries(
  state: RollingState,
  metric: string,
  fromStep = Number.NEGATIVE_INFINITY,
): Array<{ step: number; value: number }> {
  const output: Array<{ step: number; value: number }> = [];
  visitChartSeries(state, metric, fromStep, (step, value) => output.push({ step, value }));
  return output;
}

/**
 * `chartSeries` point by point, without building it: the plateau check walks two series every tick, and
 * their point objects were most of what it allocated.
 */
export function visitChartSeries(
  state: RollingState,
  metric: string,
  fromStep: number,
  visit: (step: number, value: number) => void,
): void {
  const series = state.metrics[metric];
  if (series === undefined) return;
  // When both lists are strictly step-ordered (the usual case), one merge gives what the map-and-sort
  // below gives.
  if (
    series.steps.length === series.values.length &&
    series.historySteps.length === series.historyValues.length &&
    stepsIncrease(series.historySteps) &&
    stepsIncrease(series.steps)
  ) {
    mergeSeries(series, fromStep, visit);
    return;
  }
  const byStep = new Map<number, number>();
  for (let index = 0; index < series.historySteps.length; index++)
    byStep.set(series.historySteps[index] as number, series.historyValues[index] as number);
  // The window holds every recent point at full resolution; it overrides the sparser history there.
  for (let index = 0; index < series.steps.length; index++) {
    const step = series.steps[index];
    const value = series.values[index];
    if (step !== undefined && value !== undefined) byStep.set(step, value);
  }
  for (const [step, value] of [...byStep.entries()].sort((a, b) => a[0] - b[0]))
    if (!(step < fromStep)) visit(step, value);
}

/** The steps strictly increase (a plain loop: this runs over every point, twice a tick). */
function stepsIncrease(steps: readonly number[]): boolean {
  for (let index = 1; index < steps.length; index++)
    if (!((steps[index - 1] as number) < (steps[index] as number))) return false;
  return true;
}

/** First index of the step-ordered `items` whose step is at least `fromStep`. */
function firstFrom<T>(items: readonly T[], stepOf: (item: T) => number, fromStep: number): number {
  let low = 0;
  let high = items.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (stepOf(items[middle] as T) < fromStep) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** History and window merged by step from `fromStep` on; the window's value wins where both have a step.
 *  `+ 0` turns a -0 step into 0, as a map key does. */
function mergeSeries(
  series: SeriesState,
  fromStep: number,
  visit: (step: number, value: number) => void,
): void {
  const { historySteps, historyValues, steps, values } = series;
  let fromHistory = firstFrom(historySteps, Number, fromStep);
  let fromWindow = firstFrom(steps, Number, fromStep);
  while (fromHistory < historySteps.length || fromWindow < steps.length) {
    const historyStep = historySteps[fromHistory];
    const windowStep = steps[fromWindow];
    if (historyStep !== undefined && (windowStep === undefined || historyStep < windowStep)) {
      visit(historyStep + 0, historyValues[fromHistory] as number);
      fromHistory++;
      continue;
    }
    if (historyStep !== undefined && historyStep === windowStep) fromHistory++;
    visit((windowStep as number) + 0, values[fromWindow] as number);
    fromWindow++;
  }
}
