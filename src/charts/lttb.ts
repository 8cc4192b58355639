/**
 * Largest-Triangle-Three-Buckets downsampling (Steinarsson 2013): keeps the visual shape of a series —
 * including the extreme of a one-point spike — with at most `threshold` points. Non-finite points cannot
 * take part in triangle areas, so they are split off and returned as markers for the chart to draw.
 */

export interface SeriesPoint {
  step: number;
  value: number;
}

export const DEFAULT_MAX_POINTS = 500;
const MAX_MARKERS = 100;

/** LTTB over finite points (sorted by step). Returns the input itself when it is already small enough. */
export function lttb(points: readonly SeriesPoint[], threshold: number): SeriesPoint[] {
  const length = points.length;
  if (threshold >= length || threshold <= 2) {
    return threshold <= 2 && length > threshold
      ? [points[0], points[length - 1]].filter(isPoint).slice(0, Math.max(threshold, 0))
      : [...points];
  }
  const sampled: SeriesPoint[] = [];
  const bucketSize = (length - 2) / (threshold - 2);
  let selected = 0;
  sampled.push(points[0] as SeriesPoint);
  for (let bucket = 0; bucket < threshold - 2; bucket++) {
    // Average of the next bucket: the third corner of the triangle.
    const nextStart = Math.floor((bucket + 1) * bucketSize) + 1;
    const nextEnd = Math.min(Math.floor((bucket + 2) * bucketSize) + 1, length);
    let averageX = 0;
    let averageY = 0;
    for (let index = nextStart; index < nextEnd; index++) {
      const point = points[index] as SeriesPoint;
      averageX += point.step;
      averageY += point.value;
    }
    const nextCount = Math.max(1, nextEnd - nextStart);
    averageX /= nextCount;
    averageY /= nextCount;

    const start = Math.floor(bucket * bucketSize) + 1;
    const end = Math.floor((bucket + 1) * bucketSize) + 1;
    const anchor = points[selected] as SeriesPoint;
    let maxArea = -1;
    let chosen = start;
    for (let index = start; index < end; index++) {
      const point = points[index] as SeriesPoint;
      const area = Math.abs(
        (anchor.step - averageX) * (point.value - anchor.value) -
          (anchor.step - point.step) * (averageY - anchor.value),
      );
      if (area > maxArea) {
        maxArea = area;
        chosen = index;
      }
    }
    sampled.push(points[chosen] as SeriesPoint);
    selected = chosen;
  }
  sampled.push(points[length - 1] as SeriesPoint);
  return sampled;
}

function isPoint(point: SeriesPoint | undefined): point is SeriesPoint {
  return point !== undefined;
}

interface DownsampledSeries {
  /** Finite points, at most `maxPoints`. */
  line: SeriesPoint[];
  /** NaN / ±Infinity points (at most 100, evenly picked), to draw as markers. */
  markers: SeriesPoint[];
}

/** Sort by step, split off non-finite points, LTTB the rest to `maxPoints`. */
export function downsampleSeries(
  points: readonly SeriesPoint[],
  maxPoints: number = DEFAULT_MAX_POINTS,
): DownsampledSeries {
  const finite: SeriesPoint[] = [];
  const markers: SeriesPoint[] = [];
  let sorted = true;
  let previous = Number.NEGATIVE_INFINITY;
  for (const point of points) {
    if (!Number.isFinite(point.step)) continue;
    if (point.step < previous) sorted = false;
    previous = point.step;
    if (Number.isFinite(point.value)) finite.push(point);
    else markers.push(point);
  }
  if (!sorted) {
    finite.sort((a, b) => a.step - b.step);
    markers.sort((a, b) => a.step - b.step);
  }
  let keptMarkers = markers;
  if (markers.length > MAX_MARKERS) {
    keptMarkers = [];
    const stride = markers.length / MAX_MARKERS;
    for (let index = 0; index < MAX_MARKERS; index++)
      keptMarkers.push(markers[Math.floor(index * stride)] as SeriesPoint);
  }
  return { line: lttb(finite, maxPoints), markers: keptMarkers };
}
