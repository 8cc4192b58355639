import type { ProcessState } from '../runs/executor.js';
import type { MetricPoint } from '../runs/metric-line.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { type BandWindow, keptBandWindow } from './detectors/band-window.js';
import { GRAD_NORM_METRIC, isAboveGradBand } from './detectors/grad-norm.js';
import { observeIdleGpus } from './detectors/idle-gpu.js';
import {
  checkOverfitting,
  EVAL_METRIC,
  type EvalSeries,
  recentTrainLoss,
  recordEval,
} from './detectors/overfitting.js';
import { isLossMetric } from './detectors/robust.js';
import { createThroughputState, observeThroughput, type ThroughputState } from './detectors/throughput.js';
import { observeEpisode } from './episodes.js';
import { gradNormText, idleGpuText, overfittingText, ruleText, throughputText } from './incident-text.js';
import { type AlertPolicy, type AlertRule, observeRulePoint, type RuleProgress } from './policy-checks.js';
import type { DetectorConfig, Incident, IncidentKind } from './types.js';

/**
 * The detectors that need their own small state (grad-norm band, throughput rates, evaluations, idle GPUs)
 * and the people's rules, as one table (`TICK_DETECTORS`) the tick walks. Kept beside the monitor's core
 * so evaluate.ts only hands over the tick's points; the state rides along in the monitor state (`extras`)
 * and is persisted with it.
 */

export interface ExtrasState {
  grad: Record<string, { values: number[]; above: number }>;
  throughput: ThroughputState;
  evals: Record<string, EvalSeries>;
  /** Recent training-loss values (the reference for overfitting). */
  train: number[];
  idleSince?: number;
  rules: Record<string, RuleProgress>;
}

interface Raise {
  kind: IncidentKind;
  key: string;
  fields: Omit<Incident, 'id' | 'runId' | 'kind' | 'severity' | 'at'>;
}

const MAX_TRAIN = 20;
const MAX_TRACKED = 8;

/** The training loss the overfitting check compares with: `loss`, `train_loss`, `train/loss`, … */
function isTrainLoss(name: string): boolean {
  return isLossMetric(name) && !EVAL_METRIC.test(name) && /^(train[_/])?loss$/i.test(name);
}

interface TickExtrasInput {
  extras: ExtrasState;
  episodes: Parameters<typeof observeEpisode>[0];
  meta: RunMeta;
  points: ReadonlyArray<MetricPoint & { step: number }>;
  lastStep: number | undefined;
  lastMetrics: Record<string, number>;
  lossMetrics: string[];
  now: number;
  processState: ProcessState;
  /** More data waits beyond the read cap: the step rate of this tick means nothing. */
  backlog: boolean;
  settings: DetectorConfig;
  policy: AlertPolicy | undefined;
  /** GPU utilisation read this tick (the shell probes); `undefined` turns the idle-GPU detector off. */
  gpu: { utilisation: number[] | undefined } | undefined;
  /** A woken evaluation: the per-tick (time-based) detectors wait for the timer. */
  woken: boolean;
}

type TickPoint = TickExtrasInput['points'][number];

/**
 * Grad-norm explosion, per point: the value stays above the recent band for `gradNormPoints` points.
 * `windows` keeps each metric's band up to date through the tick's points (one sort per tick).
 */
function observeGradNorm(
  input: TickExtrasInput,
  point: TickPoint,
  windows: Map<string, BandWindow>,
  raised: Raise[],
): void {
  const { extras, episodes, settings } = input;
  for (const [metric, value] of Object.entries(point.metrics)) {
    if (!GRAD_NORM_METRIC.test(metric)) continue;
    let series = extras.grad[metric];
    if (series === undefined) {
      if (Object.keys(extras.grad).length >= MAX_TRACKED) continue;
      series = { values: [], above: 0 };
      extras.grad[metric] = series;
    }
    let window = windows.get(metric);
    if (window === undefined) {
      window = keptBandWindow(series.values, settings.gradNormWindow);
      windows.set(metric, window);
    }
    const verdict = isAboveGradBand(series.values, value, settings, window.band());
    series.above = verdict.above ? series.above + 1 : 0;
    if (observeEpisode(episodes, `grad_norm:${metric}`, series.above >= settings.gradNormPoints)) {
      raised.push({
        kind: 'grad_norm',
        key: `grad_norm:${metric}`,
        fields: gradNormText(
          input.meta.name,
          metric,
          value,
          point.step,
          verdict.median,
          settings.gradNormPoints,
          [metric, ...input.lossMetrics.slice(0, 1)],
        ),
      });
    }
    if (Number.isFinite(value)) {
      series.values.push(value);
      window.push(value);
      if (series.values.length > settings.gradNormWindow) series.values.shift();
    }
  }
}

/** Overfitting, per evaluation: the evaluation loss rises while the training loss keeps falling. */
function observeOverfitting(input: TickExtrasInput, point: TickPoint, raised: Raise[]): void {
  const { extras, episodes, settings } = input;
  for (const [metric, value] of Object.entries(point.metrics)) {
    if (isTrainLoss(metric) && Number.isFinite(value)) {
      extras.train.push(value);
      if (extras.train.length > MAX_TRAIN) extras.train.shift();
    }
  }
  for (const [metric, value] of Object.entries(point.metrics)) {
    if (!EVAL_METRIC.test(metric) || !isLossMetric(metric) || extras.train.length === 0) continue;
    let series = extras.evals[metric];
    if (series === undefined) {
      if (Object.keys(extras.evals).length >= MAX_TRACKED) continue;
      series = { points: [] };
      extras.evals[metric] = series;
    }
    recordEval(series, point.step, value, recentTrainLoss(extras.train));
    const verdict = checkOverfitting(series, settings);
    if (observeEpisode(episodes, `overfitting:${metric}`, verdict.overfitting)) {
      const best = verdict.best ?? { step: point.step, value };
      raised.push({
        kind: 'overfitting',
        key: `overfitting:${metric}`,
        fields: overfittingText(
          input.meta.name,
          metric,
          best,
          { step: point.step, value },
          settings.overfitEvals,
          [metric, ...input.lossMetrics.filter(isTrainLoss).slice(0, 1)],
        ),
      });
    }
  }
}

/** People's rules on metric values, per point. */
function observeValueRules(input: TickExtrasInput, point: TickPoint, raised: Raise[]): void {
  for (const rule of input.policy?.rules ?? []) {
    if (rule.atS !== undefined) continue;
    const value = rule.metric === 'step' ? point.step : point.metrics[rule.metric];
    if (value === undefined) continue;
    const progress = ruleProgress(input.extras, rule.id);
    const holds = observeRulePoint(rule, progress, point.step, value);
    if (observeEpisode(input.episodes, `rule:${rule.id}`, holds))
      raised.push(ruleRaise(rule, input.meta.name, point.step, value, input.lossMetrics));
  }
}

/** People's rules at a time after the start (`at 30m`), checked once on the latest values. */
function observeTimeRules(input: TickExtrasInput, raised: Raise[]): void {
  const { meta } = input;
  const startedAt = meta.startedAt === undefined ? undefined : Date.parse(meta.startedAt);
  for (const rule of input.policy?.rules ?? []) {
    if (rule.atS === undefined || startedAt === undefined) continue;
    const progress = ruleProgress(input.extras, rule.id);
    if (progress.checked === true || input.now - startedAt < rule.atS * 1000) continue;
    progress.checked = true;
    const value = rule.metric === 'step' ? input.lastStep : input.lastMetrics[rule.metric];
    if (value === undefined) continue;
    const holds = observeRulePoint(rule, {}, 0, value);
    if (observeEpisode(input.episodes, `rule:${rule.id}`, holds))
      raised.push(ruleRaise(rule, meta.name, input.lastStep, value, input.lossMetrics));
  }
}

/** Throughput, per tick, while the process is alive and the tick read everything. */
function observeTickThroughput(input: TickExtrasInput, alive: boolean, raised: Raise[]): void {
  if (!alive || input.backlog) return;
  const { settings } = input;
  const verdict = observeThroughput(input.extras.throughput, input.lastStep, input.now, settings);
  if (observeEpisode(input.episodes, 'throughput', verdict.dropped) && verdict.rate !== undefined) {
    raised.push({
      kind: 'throughput',
      key: 'throughput',
      fields: throughputText(
        input.meta.name,
        verdict.rate,
        verdict.median,
        settings.throughputTicks,
        input.lastStep,
        input.lossMetrics.slice(0, 1),
      ),
    });
  }
}

/** Idle GPUs, per tick, for local runs holding GPUs. */
function observeTickIdleGpus(input: TickExtrasInput, alive: boolean, raised: Raise[]): void {
  const { extras, meta, settings } = input;
  if (input.gpu === undefined || !watchesGpus(meta)) return;
  const utilisation = alive ? input.gpu.utilisation : undefined;
  if (!alive) delete extras.idleSince;
  const verdict = observeIdleGpus(extras, utilisation, input.now, settings);
  if (observeEpisode(input.episodes, 'idle_gpu', verdict.idle)) {
    raised.push({
      kind: 'idle_gpu',
      key: 'idle_gpu',
      fields: idleGpuText(
        meta.name,
        meta.gpuIndices,
        settings.idleGpuUtilPercent,
        verdict.idleMs,
        input.lastStep,
        input.lossMetrics.slice(0, 1),
      ),
    });
  }
}

/** One tick of the table: its input, what it raises, and the grad-norm bands kept through its points. */
interface TickRun {
  input: TickExtrasInput;
  raised: Raise[];
  /** Each metric's grad-norm band, kept up to date through the tick's points (one sort per tick). */
  gradWindows: Map<string, BandWindow>;
}

/**
 * One entry of the table: the kind it raises, its part of the persisted state, its work in a tick (`point`
 * for each new point, `tick` once after the last one). Plain functions of the tick, not closures made per
 * tick: a woken evaluation runs the table for a single point.
 */
interface TickDetector {
  name: IncidentKind;
  /** Its fields of a fresh `ExtrasState`. */
  initialState(): Partial<ExtrasState>;
  point?(run: TickRun, point: TickPoint): void;
  tick?(run: TickRun): void;
}

const isAlive = (input: TickExtrasInput) => input.processState.kind === 'alive';

/**
 * The table. Point by point every detector sees the point in this order, then each runs its per-tick
 * check in this order: so raises come out ordered by step, then by detector, as they always have.
 */
const TICK_DETECTORS: readonly TickDetector[] = [
  {
    name: 'grad_norm',
    initialState: () => ({ grad: {} }),
    point: (run, point) => observeGradNorm(run.input, point, run.gradWindows, run.raised),
  },
  {
    name: 'overfitting',
    initialState: () => ({ evals: {}, train: [] }),
    point: (run, point) => observeOverfitting(run.input, point, run.raised),
  },
  {
    name: 'rule',
    initialState: () => ({ rules: {} }),
    point: (run, point) => observeValueRules(run.input, point, run.raised),
    tick: (run) => observeTimeRules(run.input, run.raised),
  },
  {
    name: 'throughput',
    initialState: () => ({ throughput: createThroughputState() }),
    tick: (run) => observeTickThroughput(run.input, isAlive(run.input), run.raised),
  },
  {
    name: 'idle_gpu',
    // `idleSince` is set only while the GPUs are idle.
    initialState: () => ({}),
    tick: (run) => observeTickIdleGpus(run.input, isAlive(run.input), run.raised),
  },
];

/** Only the detectors that look at points are called per point (that loop runs for every point). */
const POINT_DETECTORS = TICK_DETECTORS.filter((detector) => detector.point !== undefined);

export function createExtrasState(): ExtrasState {
  // Every required field of ExtrasState has its owner in the table.
  return Object.assign({}, ...TICK_DETECTORS.map((detector) => detector.initialState())) as ExtrasState;
}

/** Runs the table over one tick's points; returns what to raise, in order. */
export function runTickExtras(input: TickExtrasInput): Raise[] {
  const run: TickRun = { input, raised: [], gradWindows: new Map() };
  for (const point of input.points) for (const detector of POINT_DETECTORS) detector.point?.(run, point);
  // A woken evaluation leaves the per-tick (time-based) detectors to the timer.
  if (input.woken) return run.raised;
  for (const detector of TICK_DETECTORS) detector.tick?.(run);
  return run.raised;
}

/** The idle-GPU detector watches local runs that hold GPUs. */
export function watchesGpus(meta: RunMeta): boolean {
  return meta.executor === 'local' && meta.gpuIndices.length > 0;
}

function ruleProgress(extras: ExtrasState, ruleId: string): RuleProgress {
  let progress = extras.rules[ruleId];
  if (progress === undefined) {
    progress = {};
    extras.rules[ruleId] = progress;
  }
  return progress;
}

function ruleRaise(
  rule: AlertRule,
  name: string,
  step: number | undefined,
  value: number,
  lossMetrics: string[],
): Raise {
  return { kind: 'rule', key: `rule:${rule.id}`, fields: ruleText(rule, name, step, value, lossMetrics) };
}
