import { type RobustBand, robustBand } from './robust.js';

/**
 * Grad-norm explosion: `grad_norm` far above its robust band — above `median + K × MAD` of the previous
 * `window` values *and* at least `R ×` their median — for `points` consecutive points. Healthy training
 * has isolated grad-norm spikes; an explosion keeps climbing, and usually comes before a NaN.
 */

export interface GradNormSettings {
  gradNormWindow: number;
  gradNormMadK: number;
  gradNormMinRatio: number;
  gradNormPoints: number;
}

export const GRAD_NORM_METRIC = /(^|[^a-z])grad(ient)?[_-]?norm/i;
const MIN_HISTORY = 20;

export function isAboveGradBand(
  previous: readonly number[],
  value: number,
  settings: GradNormSettings,
  band: RobustBand = robustBand(previous, settings.gradNormWindow),
): { above: boolean; median: number } {
  if (band.size < MIN_HISTORY) return { above: false, median: Number.NaN };
  const center = band.center;
  const threshold = Math.max(
    center + settings.gradNormMadK * band.spread,
    center * settings.gradNormMinRatio,
  );
  // A non-finite grad norm is the NaN detector's alert (one alert for one problem).
  return { above: Number.isFinite(value) && value > threshold, median: center };
}
