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

/** Scratch space for the pairwise slopes and for a bin's values, reused: the plateau check runs every tick. */
let pairScratch = new Float64Array((MAX_TREND_BINS * (MAX_TREND_BINS - 1)) / 2);
let binScratch = new Float64Array(64);

/**
 * The `k`-th smallest of `values[from, to)` (rearranging that range, and leaving every smaller value before
 * `k` and every larger one after it): what `sorted[k]` is after a numeric sort, found in linear time. The
 * plateau check needs three order statistics of ~1,100 slopes each tick, where a full sort led its profile.
 * Only for NaN-free values, where `<` orders them as the typed sort does (no -0 reaches here).
 */
function selectKth(values: Float64Array, from: number, to: number, k: number): number {
  let low = from;
  let high = to - 1;
  while (low < high) {
    // Median of three as the pivot keeps sorted and reversed runs (the usual slopes) linear.
    const middle = (low + high) >> 1;
    const a = values[low] as number;
    const b = values[middle] as number;
    const c = values[high] as number;
    const pivot = Math.max(Math.min(a, b), Math.min(Math.max(a, b), c));
    let left = low;
    let right = high;
    while (left <= right) {
      while ((values[left] as number) < pivot) left++;
      while ((values[right] as number) > pivot) right--;
      if (left <= right) {
        const swap = values[left] as number;
        values[left] = values[right] as number;
        values[right] = swap;
        left++;
        right--;
      }
    }
    // [low, right] ≤ pivot ≤ [left, high], and whatever lies between equals the pivot.
    if (k <= right) high = right;
    else if (k >= left) low = left;
    else return values[k] as number;
  }
  return values[k] as number;
}

/** The largest of `values[from, to)`. */
function maxOf(values: Float64Array, from: number, to: number): number {
  let largest = Number.NEGATIVE_INFINITY;
  for (let index = from; index < to; index++)
    if ((values[index] as number) > largest) largest = values[index] as number;
  return largest;
}

/** Median of the NaN-free `values[0, length)`, as `middleOfSorted` of their sorted copy gives it. */
function medianInPlace(values: Float64Array, length: number): number {
  const middle = length >> 1;
  const upper = selectKth(values, 0, length, middle);
  // Everything before `middle` is ≤ it now: the one just below the middle is their largest.
  return length % 2 === 1 ? upper : (maxOf(values, 0, middle) + upper) / 2;
}

/**
 * Median of `values[from, to)`. A NaN (a log of a step below -1) keeps the comparator sort's order; else the
 * median by selection equals that of the typed copy's numeric sort (no -0 comes out of a log).
 */
function medianOf(values: readonly number[], from: number, to: number): number {
  const length = to - from;
  if (binScratch.length < length) binScratch = new Float64Array(length);
  for (let index = from; index < to; index++) {
    const value = values[index] as number;
    if (Number.isNaN(value)) return middleOfSorted(values.slice(from, to).sort((a, b) => a - b));
    binScratch[index - from] = value;
  }
  return medianInPlace(binScratch, length);
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
  const needed = (n * (n - 1)) / 2;
  if (pairScratch.length < needed) pairScratch = new Float64Array(needed);
  const pairs = pairScratch;
  let count = 0;
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const dx = (x[j] as number) - (x[i] as number);
      if (dx > 0) pairs[count++] = ((y[j] as number) - (y[i] as number)) / dx;
    }
  }
  if (count < 3) return undefined;
  // Slopes are finite or ±Infinity, never -0 (dx > 0, and no bin median is -0); a NaN (from NaN bin medians)
  // has no place in a selection, so those few take the sort, as before.
  const spread = z * Math.sqrt((n * (n - 1) * (2 * n + 5)) / 18);
  const lowerIndex = Math.max(0, Math.min(count - 1, Math.floor((count - spread) / 2)));
  const upperIndex = Math.max(0, Math.min(count - 1, Math.ceil((count + spread) / 2)));
  const range = (x.at(-1) as number) - (x[0] as number);
  for (let index = 0; index < count; index++) {
    if (!Number.isNaN(pairs[index] as number)) continue;
    const sorted = pairs.slice(0, count).sort();
    const [slope, lower, upper] = [middleOfSorted(sorted), sorted[lowerIndex], sorted[upperIndex]];
    return { slope, lower: lower as number, upper: upper as number, range, points: n };
  }
  // Three order statistics: the median first, then each bound within its side of it.
  const middle = count >> 1;
  const upperMiddle = selectKth(pairs, 0, count, middle);
  const slope = count % 2 === 1 ? upperMiddle : (maxOf(pairs, 0, middle) + upperMiddle) / 2;
  const lower = lowerIndex < middle ? selectKth(pairs, 0, middle, lowerIndex) : (pairs[lowerIndex] as number);
  const upper =
    upperIndex > middle ? selectKth(pairs, middle + 1, count, upperIndex) : (pairs[upperIndex] as number);
  return { slope, lower, upper, range, points: n };
}
