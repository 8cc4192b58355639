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

function medianOf(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
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
    outX.push(medianOf(xs.slice(from, to)));
    outY.push(medianOf(ys.slice(from, to)));
  }
  return [outX, outY];
}

/** Theil–Sen slope of y on x with a two-sided confidence interval at normal quantile `z`. */
export function theilSen(xs: readonly number[], ys: readonly number[], z = 1.645): Trend | undefined {
  const [x, y] = binMedians(xs, ys, MAX_TREND_BINS);
  const n = x.length;
  if (n < 6) return undefined;
  const slopes: number[] = [];
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const dx = (x[j] as number) - (x[i] as number);
      if (dx > 0) slopes.push(((y[j] as number) - (y[i] as number)) / dx);
    }
  }
  if (slopes.length < 3) return undefined;
  slopes.sort((a, b) => a - b);
  const count = slopes.length;
  const spread = z * Math.sqrt((n * (n - 1) * (2 * n + 5)) / 18);
  const lowerIndex = Math.max(0, Math.min(count - 1, Math.floor((count - spread) / 2)));
  const upperIndex = Math.max(0, Math.min(count - 1, Math.ceil((count + spread) / 2)));
  return {
    slope: medianOf(slopes),
    lower: slopes[lowerIndex] as number,
    upper: slopes[upperIndex] as number,
    range: (x.at(-1) as number) - (x[0] as number),
    points: n,
  };
}
