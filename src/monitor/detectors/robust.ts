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

/**
 * The median and scaled MAD of the finite values among the last `count` of `values`, with two typed
 * copies and no intermediate arrays (the spike and grad-norm bands run this for every point).
 */
export interface RobustBand {
  /** Finite values in the window. */
  size: number;
  center: number;
  spread: number;
}

export function robustBand(values: readonly number[], count: number): RobustBand {
  const from = Math.max(0, values.length - count);
  const window = new Float64Array(values.length - from);
  let size = 0;
  for (let index = from; index < values.length; index++) {
    const value = values[index] as number;
    if (Number.isFinite(value)) window[size++] = value;
  }
  if (size === 0) return { size, center: Number.NaN, spread: Number.NaN };
  const sorted = window.subarray(0, size).sort();
  const center = middleOf(sorted);
  for (let index = 0; index < size; index++) sorted[index] = Math.abs((sorted[index] as number) - center);
  return { size, center, spread: 1.4826 * middleOf(sorted.sort()) };
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
