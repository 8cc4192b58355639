import type { RunMeta } from '../runs/records/run-types.js';

/**
 * What a finished run with a saved model amounts to: its metric (final and best), its evaluation, the best
 * checkpoint, the time and money it took. Pure: the caller reads the series and the checkpoint steps.
 */

type Series = Record<string, Array<{ step: number; value: number }>>;

export interface ModelSummary {
  metric: { name: string; mode: 'min' | 'max'; final?: number; best?: number; bestStep?: number };
  evalResults: Record<string, number>;
  evalStatus?: 'passed' | 'failed';
  /** The saved checkpoint nearest to (at or before) the best metric step, else the last one. */
  bestCheckpointStep?: number;
  wallMs?: number;
  gpuHours: number;
  costUsd: number;
}

/** The run's metric: `loss`/min unless the run's config names one (`metric`, `mode`, as sweeps set). */
export function metricOf(meta: RunMeta, series: Series): { name: string; mode: 'min' | 'max' } {
  const configured = meta.config?.metric;
  const mode = meta.config?.mode === 'max' ? 'max' : 'min';
  if (typeof configured === 'string' && configured !== '') return { name: configured, mode };
  if (series.loss !== undefined) return { name: 'loss', mode: 'min' };
  const lossLike = Object.keys(series).find((name) => /loss/i.test(name));
  return { name: lossLike ?? 'loss', mode: 'min' };
}

export function summariseModel(
  meta: RunMeta,
  series: Series,
  checkpointSteps: number[],
  gpuHourUsd: number,
): ModelSummary {
  const { name, mode } = metricOf(meta, series);
  const points = (series[name] ?? []).filter((point) => Number.isFinite(point.value));
  const metric: ModelSummary['metric'] = { name, mode };
  const last = points.at(-1);
  if (last !== undefined) metric.final = last.value;
  let best: { step: number; value: number } | undefined;
  for (const point of points) {
    if (best === undefined || (mode === 'min' ? point.value < best.value : point.value > best.value))
      best = point;
  }
  if (best !== undefined) {
    metric.best = best.value;
    metric.bestStep = best.step;
  }
  const summary: ModelSummary = {
    metric,
    evalResults: meta.evaluation?.results ?? {},
    gpuHours: 0,
    costUsd: 0,
  };
  if (meta.evaluation !== undefined) summary.evalStatus = meta.evaluation.status;
  const sorted = [...checkpointSteps].sort((a, b) => a - b);
  const atOrBefore = sorted.filter((step) => best === undefined || step <= best.step).at(-1);
  const checkpoint = atOrBefore ?? sorted.at(-1);
  if (checkpoint !== undefined) summary.bestCheckpointStep = checkpoint;
  if (meta.startedAt !== undefined && meta.endedAt !== undefined) {
    const wallMs = Math.max(0, Date.parse(meta.endedAt) - Date.parse(meta.startedAt));
    const hours = wallMs / 3_600_000 + (meta.priorHours ?? 0);
    summary.wallMs = wallMs;
    summary.gpuHours = hours * meta.gpus;
    // A run priced by its backend (an HF flavour) keeps that price, as in `spend`.
    summary.costUsd = hours * (meta.hourlyUsd ?? meta.gpus * gpuHourUsd);
  }
  return summary;
}
