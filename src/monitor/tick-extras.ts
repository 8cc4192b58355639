import type { ProcessState } from '../runs/executor.js';
import type { MetricPoint } from '../runs/metric-line.js';
import type { RunMeta } from '../runs/run-types.js';
import type { AlertPolicy } from './alert-policy.js';
import { type AlertRule, observeRulePoint, type RuleProgress } from './alert-rules.js';
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
import type { DetectorConfig, Incident, IncidentKind } from './types.js';

/**
 * The detectors that need their own small state (grad-norm band, throughput rates, evaluations, idle GPUs)
 * and the people's rules. Kept beside the monitor's core so monitor.ts only hands over the tick's points;
 * the state rides along in the monitor state (`extras`) and is persisted with it.
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

export function createExtrasState(): ExtrasState {
  return { grad: {}, throughput: createThroughputState(), evals: {}, train: [], rules: {} };
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

export function runTickExtras(input: {
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
}): Raise[] {
  const { extras, episodes, meta, settings } = input;
  const raised: Raise[] = [];
  const name = meta.name;

  for (const point of input.points) {
    // --- grad-norm explosion (per point) ---
    for (const [metric, value] of Object.entries(point.metrics)) {
      if (!GRAD_NORM_METRIC.test(metric)) continue;
      let series = extras.grad[metric];
      if (series === undefined) {
        if (Object.keys(extras.grad).length >= MAX_TRACKED) continue;
        series = { values: [], above: 0 };
        extras.grad[metric] = series;
      }
      const verdict = isAboveGradBand(series.values, value, settings);
      series.above = verdict.above ? series.above + 1 : 0;
      if (observeEpisode(episodes, `grad_norm:${metric}`, series.above >= settings.gradNormPoints)) {
        raised.push({
          kind: 'grad_norm',
          key: `grad_norm:${metric}`,
          fields: gradNormText(name, metric, value, point.step, verdict.median, settings.gradNormPoints, [
            metric,
            ...input.lossMetrics.slice(0, 1),
          ]),
        });
      }
      if (Number.isFinite(value)) {
        series.values.push(value);
        if (series.values.length > settings.gradNormWindow) series.values.shift();
      }
    }

    // --- overfitting (per evaluation) ---
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
          fields: overfittingText(name, metric, best, { step: point.step, value }, settings.overfitEvals, [
            metric,
            ...input.lossMetrics.filter(isTrainLoss).slice(0, 1),
          ]),
        });
      }
    }

    // --- people's rules on metric values ---
    for (const rule of input.policy?.rules ?? []) {
      if (rule.atS !== undefined) continue;
      const value = rule.metric === 'step' ? point.step : point.metrics[rule.metric];
      if (value === undefined) continue;
      const progress = ruleProgress(extras, rule.id);
      const holds = observeRulePoint(rule, progress, point.step, value);
      if (observeEpisode(episodes, `rule:${rule.id}`, holds))
        raised.push(ruleRaise(rule, name, point.step, value, input.lossMetrics));
    }
  }

  // --- time rules (checked once) ---
  const startedAt = meta.startedAt === undefined ? undefined : Date.parse(meta.startedAt);
  for (const rule of input.policy?.rules ?? []) {
    if (rule.atS === undefined || startedAt === undefined) continue;
    const progress = ruleProgress(extras, rule.id);
    if (progress.checked === true || input.now - startedAt < rule.atS * 1000) continue;
    progress.checked = true;
    const value = rule.metric === 'step' ? input.lastStep : input.lastMetrics[rule.metric];
    if (value === undefined) continue;
    const holds = observeRulePoint(rule, {}, 0, value);
    if (observeEpisode(episodes, `rule:${rule.id}`, holds))
      raised.push(ruleRaise(rule, name, input.lastStep, value, input.lossMetrics));
  }

  const alive = input.processState.kind === 'alive';
  // --- throughput (per tick) ---
  if (alive && !input.backlog) {
    const verdict = observeThroughput(extras.throughput, input.lastStep, input.now, settings);
    if (observeEpisode(episodes, 'throughput', verdict.dropped) && verdict.rate !== undefined) {
      raised.push({
        kind: 'throughput',
        key: 'throughput',
        fields: throughputText(
          name,
          verdict.rate,
          verdict.median,
          settings.throughputTicks,
          input.lastStep,
          input.lossMetrics.slice(0, 1),
        ),
      });
    }
  }

  // --- idle GPUs (per tick, local runs holding GPUs) ---
  if (input.gpu !== undefined && watchesGpus(meta)) {
    const utilisation = alive ? input.gpu.utilisation : undefined;
    if (!alive) delete extras.idleSince;
    const verdict = observeIdleGpus(extras, utilisation, input.now, settings);
    if (observeEpisode(episodes, 'idle_gpu', verdict.idle)) {
      raised.push({
        kind: 'idle_gpu',
        key: 'idle_gpu',
        fields: idleGpuText(
          name,
          meta.gpuIndices,
          settings.idleGpuUtilPercent,
          verdict.idleMs,
          input.lastStep,
          input.lossMetrics.slice(0, 1),
        ),
      });
    }
  }
  return raised;
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
