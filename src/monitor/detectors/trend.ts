/**
 * Robust trend of a noisy curve: the Theil–Sen slope (median of pairwise slopes) with the distribution-free
 * confidence interval of Sen (1968), from Kendall's tau variance. Long series are first reduced to bin
 * medians, which keeps the cost bounded (≤ 48 bins → ≤ 1,128 pairs) and damps the noise the interval
 * then reflects.
 */

interface Trend {
  slope: number;
  /** Lower and upper confidence bounds of the slope. */
  lower: number;
  upper: number;
  /** Span of x covered (first to last bin). */
  range: number;
  points: number;
}

const MAX_TREND_BINS = 48;

/**
 * Median of `values[from, to)`. A typed copy's native sort orders the values as `(a, b) => a - b` does
 * (no -0 comes out of a log); a NaN (a log of a step below -1) keeps the comparator's order.
 */
function medianOf(values: readonly number[], from: number, to: number): number {
  const copy = new Float64Array(to - from);
  for (let index = from; index < to; index++) {
    const value = values[index] as number;
    if (Number.isNaN(value)) return middleOfSorted(values.slice(from, to).sort((a, b) => a - b));
    copy[index - from] = value;
  }
  return middleOfSorted(copy.sort());
}

function middleOfSorted(sorted: ArrayLike<number>): number {
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** Equal-count bins of (x, y), each reduced to the median of its x and of its y. */
function binMedians(xs: readonly number[], ys: readonly number[], bins: number): [number[], number[]] {
  if (xs.length <= bins) return [[...xs], [...ys]];
  const outX: number[] = [];
  const outY: number[] = [];
  for (let bin = 0; bin < bins; bin++) {
    const from = Math.floor((bin * xs.length) / bins);
    const to = Math.floor(((bin + 1) * xs.length) / bins);
    if (to <= from) continue;
    outX.push(medianOf(xs, from, to));
    outY.push(medianOf(ys, from, to));
  }
  return [outX, outY];
}

/** Theil–Sen slope of y on x with a two-sided confidence interval at normal quantile `z`. */
export function theilSen(xs: readonly number[], ys: readonly number[], z = 1.645): Trend | undefined {
  const [x, y] = binMedians(xs, ys, MAX_TREND_BINS);
  const n = x.length;
  if (n < 6) return undefined;
  // Slopes are finite or ±Infinity, never NaN or -0 (dx > 0, and no bin median is -0), so the numeric sort
  // of a typed array orders them exactly as a comparator would, several times faster.
  const pairs = new Float64Array((n * (n - 1)) / 2);
  let count = 0;
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const dx = (x[j] as number) - (x[i] as number);
      if (dx > 0) pairs[count++] = ((y[j] as number) - (y[i] as number)) / dx;
    }
  }
  if (count < 3) return undefined;
  const slopes = pairs.subarray(0, count).sort();
  const spread = z * Math.sqrt((n * (n - 1) * (2 * n + 5)) / 18);
  const lowerIndex = Math.max(0, Math.min(count - 1, Math.floor((count - spread) / 2)));
  const upperIndex = Math.max(0, Math.min(count - 1, Math.ceil((count + spread) / 2)));
  return {
    slope: middleOfSorted(slopes),
    lower: slopes[lowerIndex] as number,
    upper: slopes[upperIndex] as number,
    range: (x.at(-1) as number) - (x[0] as number),
    points: n,
  };
}
