import { median } from './robust.js';

/**
 * Overfitting: an evaluation loss (`eval_*` / `val_*` loss) has risen for `overfitEvals` evaluations in a
 * row since its best — each above the best, the last at least `overfitMinRise` (relative) above it — while
 * the training loss (median of its recent points at each evaluation) kept falling over the same span.
 */

export interface OverfitSettings {
  overfitEvals: number;
  overfitMinRise: number;
}

export const EVAL_METRIC = /^(eval|val|valid|validation|test)[_/]/i;

export interface EvalSeries {
  /** `[step, eval value, train loss then]`, oldest first, bounded. */
  points: Array<[number, number, number]>;
}

const MAX_EVALS = 64;
/** An evaluation within 0.2 % of the best is noise, not a rise. */
const NOISE = 0.002;
/** Training loss must have fallen at least this much (relative) since the best evaluation. */
const TRAIN_FALL = 0.01;

export function recordEval(series: EvalSeries, step: number, value: number, trainLoss: number): void {
  series.points.push([step, value, trainLoss]);
  if (series.points.length > MAX_EVALS) series.points.shift();
}

interface OverfitVerdict {
  overfitting: boolean;
  best?: { step: number; value: number };
  last?: { step: number; value: number };
}

export function checkOverfitting(series: EvalSeries, settings: OverfitSettings): OverfitVerdict {
  const points = series.points.filter((point) => Number.isFinite(point[1]));
  if (points.length < settings.overfitEvals + 1) return { overfitting: false };
  let bestIndex = 0;
  for (let index = 1; index < points.length; index++)
    if ((points[index] as [number, number, number])[1] <= (points[bestIndex] as [number, number, number])[1])
      bestIndex = index;
  const best = points[bestIndex] as [number, number, number];
  const last = points.at(-1) as [number, number, number];
  const since = points.slice(bestIndex + 1);
  const rising =
    since.length >= settings.overfitEvals &&
    since.every((point) => point[1] > best[1] * (1 + NOISE)) &&
    last[1] >= best[1] * (1 + settings.overfitMinRise);
  const trainFalling =
    Number.isFinite(best[2]) && Number.isFinite(last[2]) && last[2] < best[2] * (1 - TRAIN_FALL);
  return {
    overfitting: rising && trainFalling,
    best: { step: best[0], value: best[1] },
    last: { step: last[0], value: last[1] },
  };
}

/** The training loss "now": the median of its recent values. */
export function recentTrainLoss(recent: readonly number[]): number {
  const finite = recent.filter(Number.isFinite);
  return finite.length === 0 ? Number.NaN : median(finite);
}
