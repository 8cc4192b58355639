/** Small robust-statistics helpers shared by the rolling state and the detectors. */

// Medians run for every point of every run (spike, grad norm): a Float64Array's native numeric sort is
// several times faster than Array#sort with a comparator, and makes no garbage beyond the one copy.
function middleOf(sorted: Float64Array): number {
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  return middleOf(Float64Array.from(values).sort());
}

/** Median absolute deviation, scaled by 1.4826 so it estimates the standard deviation of normal data. */
export function scaledMad(values: readonly number[], center: number = median(values)): number {
  if (values.length === 0) return Number.NaN;
  const deviations = new Float64Array(values.length);
  for (let index = 0; index < values.length; index++) {
    deviations[index] = Math.abs((values[index] as number) - center);
  }
  return 1.4826 * middleOf(deviations.sort());
}

/** Metrics the loss detectors (spike, divergence, plateau) watch: anything named like a loss or perplexity. */
export function isLossMetric(name: string): boolean {
  return /loss|perplexity|(^|[^a-z])ppl([^a-z]|$)/i.test(name);
}

export function finiteOnly(values: readonly number[]): number[] {
  const finite: number[] = [];
  for (const value of values) if (Number.isFinite(value)) finite.push(value);
  return finite;
}
