import { finiteOnly, median, type RobustBand, robustBand } from './robust.js';

export interface SpikeSettings {
  spikeWindow: number;
  spikeMadK: number;
  spikeMinRatio: number;
}

export interface DivergenceSettings {
  divergenceWindow: number;
  divergenceMinRise: number;
}

/** Pure loss-curve detectors: spike (per point) and divergence (per tick); plateau is in plateau.ts. */

interface SpikeVerdict {
  spike: boolean;
  median: number;
  threshold: number;
}

/** Points needed before a spike can be judged (fewer makes the median meaningless). */
const MIN_SPIKE_HISTORY = 10;

/**
 * Is `value` a spike against the `previous` values (the rolling window before it)? Robust: above
 * median + k·MAD *and* at least `spikeMinRatio` × the median (when the median is positive), so neither a
 * perfectly flat curve (MAD 0) nor ordinary noise trips it. `band` is the band of `previous` when the caller
 * keeps it up to date (band-window.ts).
 */
export function checkSpike(
  previous: readonly number[],
  value: number,
  config: SpikeSettings,
  band: RobustBand = robustBand(previous, config.spikeWindow),
): SpikeVerdict {
  if (band.size < Math.min(MIN_SPIKE_HISTORY, config.spikeWindow) || !Number.isFinite(value)) {
    return { spike: false, median: Number.NaN, threshold: Number.NaN };
  }
  const center = band.center;
  const spread = band.spread;
  let threshold = center + config.spikeMadK * spread;
  if (center > 0) threshold = Math.max(threshold, center * config.spikeMinRatio);
  else threshold = Math.max(threshold, center + Math.abs(center) * (config.spikeMinRatio - 1));
  return { spike: value > threshold, median: center, threshold };
}

/** The last `count` finite values, oldest first (`finiteOnly(values).slice(-count)` without copying all). */
function lastFinite(values: readonly number[], count: number): number[] {
  const found: number[] = [];
  for (let index = values.length - 1; index >= 0 && found.length < count; index--) {
    const value = values[index] as number;
    if (Number.isFinite(value)) found.push(value);
  }
  return found.reverse();
}

interface DivergenceVerdict {
  diverging: boolean;
  from: number;
  to: number;
  rise: number;
}

/**
 * Sustained rise: over the last `divergenceWindow` finite points, the median of the last third is at least
 * `divergenceMinRise` (relative) above the median of the first third, and the middle third sits between them.
 * A single spike moves none of the three medians, and every point of the last third must lie above the
 * first third's median (noise alone does not keep a whole third high).
 */
export function checkDivergence(values: readonly number[], config: DivergenceSettings): DivergenceVerdict {
  const window =
    config.divergenceWindow > 0
      ? lastFinite(values, config.divergenceWindow)
      : finiteOnly(values).slice(-config.divergenceWindow);
  if (window.length < Math.max(config.divergenceWindow, 6))
    return { diverging: false, from: 0, to: 0, rise: 0 };
  const third = Math.floor(window.length / 3);
  const first = median(window.slice(0, third));
  const middle = median(window.slice(third, window.length - third));
  const last = median(window.slice(window.length - third));
  const rise = (last - first) / Math.max(Math.abs(first), 1e-12);
  // Every point of the last third above the first third's median: a noisy series (RL value losses) whose
  // thirds' medians wander apart by chance still has low points late in the window; a real rise does not.
  const lastLow = Math.min(...window.slice(window.length - third));
  const diverging = rise >= config.divergenceMinRise && middle >= first && last >= middle && lastLow > first;
  return { diverging, from: first, to: last, rise };
}
