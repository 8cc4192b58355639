import { type RobustBand, robustBand } from './robust.js';

/**
 * The robust band (median and scaled MAD) of a series' last `count` values, kept up to date point by point
 * within a tick: the finite values stay sorted (a binary-search insert and remove per point), and the MAD
 * is read off the sorted values by walking outward from the median, so no point sorts anything. A tick
 * of 30 points used to sort the window twice per point; this sorts it once per tick. Results are the
 * same numbers as `robustBand` (test/monitor/fast-paths.test.ts compares them on random series).
 */
export interface BandWindow {
  /** `robustBand(values, count)` of the values mirrored so far. */
  band(): RobustBand;
  /** The series gained `value` at its end (its oldest value leaves the window when it is full). */
  push(value: number): void;
  /** Whether the window holds the last values of `values` (same count, same first and last value). */
  mirrors(values: readonly number[]): boolean;
}

/** Total order of the typed-array sort: numeric, with -0 before +0. */
function before(left: number, right: number): boolean {
  return left < right || (left === 0 && right === 0 && 1 / left < 1 / right);
}

export function createBandWindow(values: readonly number[], count: number): BandWindow {
  if (!Number.isInteger(count) || count <= 0) {
    // Not a window this helper can mirror: fall back to recomputing from a copy.
    const copy = [...values];
    return {
      band: () => robustBand(copy, count),
      push: (value) => void copy.push(value),
      mirrors: () => false,
    };
  }
  const ring = new Float64Array(count);
  let ringStart = 0;
  let ringLength = 0;
  const sorted = new Float64Array(count);
  let size = 0;

  // First index whose value is not before `value` (lower) or is after it (upper).
  function search(value: number, upper: boolean): number {
    let low = 0;
    let high = size;
    while (low < high) {
      const middle = (low + high) >> 1;
      const at = sorted[middle] as number;
      if (upper ? !before(value, at) : before(at, value)) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  function insert(value: number): void {
    const index = search(value, true);
    sorted.copyWithin(index + 1, index, size);
    sorted[index] = value;
    size++;
  }

  function remove(value: number): void {
    const index = search(value, false);
    sorted.copyWithin(index, index + 1, size);
    size--;
  }

  function push(value: number): void {
    if (ringLength === count) {
      const leaving = ring[ringStart] as number;
      ringStart = (ringStart + 1) % count;
      ringLength--;
      if (Number.isFinite(leaving)) remove(leaving);
    }
    ring[(ringStart + ringLength) % count] = value;
    ringLength++;
    if (Number.isFinite(value)) insert(value);
  }

  const from = Math.max(0, values.length - count);
  for (let index = from; index < values.length; index++) {
    const value = values[index] as number;
    ring[ringLength++] = value;
    if (Number.isFinite(value)) sorted[size++] = value;
  }
  sorted.subarray(0, size).sort();

  function mirrors(other: readonly number[]): boolean {
    if (ringLength !== Math.min(other.length, count) || ringLength === 0) return ringLength === other.length;
    const first = ring[ringStart] as number;
    const last = ring[(ringStart + ringLength - 1) % count] as number;
    return Object.is(first, other[other.length - ringLength]) && Object.is(last, other[other.length - 1]);
  }

  return { band: () => bandOfSorted(sorted, size), push, mirrors };
}

/** Windows kept between ticks, keyed by the array they mirror (a state read again makes new arrays). */
const keptWindows = new WeakMap<readonly number[], { count: number; window: BandWindow }>();

/**
 * `createBandWindow(values, count)`, kept from the previous tick when it still mirrors `values`: a woken
 * evaluation sees one point, and sorting the whole window again for it cost more than the point itself.
 * The caller pushes each value it appends to `values` into the window too, as within a tick.
 */
export function keptBandWindow(values: readonly number[], count: number): BandWindow {
  const entry = keptWindows.get(values);
  if (entry !== undefined && entry.count === count && entry.window.mirrors(values)) return entry.window;
  const window = createBandWindow(values, count);
  keptWindows.set(values, { count, window });
  return window;
}

function middleOf(sorted: Float64Array, size: number): number {
  const middle = size >> 1;
  return size % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/**
 * Median and scaled MAD of `sorted[0, size)`. The deviations from the median fall to its left and rise to
 * its right, so merging the two runs outward yields them in order: the middle one is the MAD.
 */
function bandOfSorted(sorted: Float64Array, size: number): RobustBand {
  if (size === 0) return { size, center: Number.NaN, spread: Number.NaN };
  const center = middleOf(sorted, size);
  let right = 0;
  let high = size;
  while (right < high) {
    const middle = (right + high) >> 1;
    if ((sorted[middle] as number) < center) right = middle + 1;
    else high = middle;
  }
  let left = right - 1;
  const wanted = size >> 1;
  let previous = Number.NaN;
  let current = Number.NaN;
  for (let taken = 0; taken <= wanted; taken++) {
    previous = current;
    const leftDeviation = left >= 0 ? center - (sorted[left] as number) : Number.POSITIVE_INFINITY;
    const rightDeviation = right < size ? (sorted[right] as number) - center : Number.POSITIVE_INFINITY;
    if (right >= size || (left >= 0 && leftDeviation < rightDeviation)) {
      current = leftDeviation;
      left--;
    } else {
      current = rightDeviation;
      right++;
    }
  }
  const mad = size % 2 === 1 ? current : (previous + current) / 2;
  return { size, center, spread: 1.4826 * mad };
}
