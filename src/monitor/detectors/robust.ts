/** Small robust-statistics helpers shared by the rolling state and the detectors. */

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** Median absolute deviation, scaled by 1.4826 so it estimates the standard deviation of normal data. */
export function scaledMad(values: readonly number[], center: number = median(values)): number {
  return 1.4826 * median(values.map((value) => Math.abs(value - center)));
}

/** Metrics the loss detectors (spike, divergence, plateau) watch: anything named like a loss or perplexity. */
export function isLossMetric(name: string): boolean {
  return /loss|perplexity|(^|[^a-z])ppl([^a-z]|$)/i.test(name);
}

export function finiteOnly(values: readonly number[]): number[] {
  return values.filter((value) => Number.isFinite(value));
}
