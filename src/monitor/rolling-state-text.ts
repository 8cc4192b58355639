import type { RollingState, SeriesState } from './rolling-stats.js';

/**
 * The rolling state as stored in Redis: JSON with non-finite numbers as words, each window's values as the
 * base64 of their float64 bytes, and each chart history as `[step, value]` pairs (kept in memory as two flat
 * arrays, rolling-stats.ts).
 */

const NON_FINITE_CODES: Record<string, number> = {
  NaN: Number.NaN,
  Inf: Number.POSITIVE_INFINITY,
  '-Inf': Number.NEGATIVE_INFINITY,
};

function encodeNumber(value: number): number | string {
  if (Number.isFinite(value)) return value;
  return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Inf' : '-Inf';
}

function decodeNumber(value: unknown): number {
  if (typeof value === 'number') return value;
  return typeof value === 'string' ? (NON_FINITE_CODES[value] ?? Number.NaN) : Number.NaN;
}

/**
 * The rolling state as JSON, with the non-finite numbers as the strings "NaN", "Inf", "-Inf" (plain JSON
 * would turn them into null). This runs on every tick of every run, and most of a state is its chart
 * histories (written as pairs, slow to stringify), which only grow between compactions: each history's text
 * is kept and extended by its new pairs (a compaction makes new arrays, so a new text).
 */
export function serialiseRollingState(state: RollingState): string {
  const { metrics, lastMetrics, ...rest } = state;
  const encodedLast: Record<string, number | string> = {};
  for (const [name, value] of Object.entries(lastMetrics)) encodedLast[name] = encodeNumber(value);
  const parts: string[] = [];
  for (const [name, series] of Object.entries(metrics))
    parts.push(`${JSON.stringify(name)}:${seriesText(series)}`);
  return withField(JSON.stringify({ ...rest, lastMetrics: encodedLast }), 'metrics', `{${parts.join(',')}}`);
}

/** `objectText` (a JSON object) with one more field, whose value is already JSON. */
export function withField(objectText: string, name: string, valueText: string): string {
  const separator = objectText === '{}' ? '' : ',';
  return `${objectText.slice(0, -1)}${separator}${JSON.stringify(name)}:${valueText}}`;
}

function seriesText(series: SeriesState): string {
  const { historySteps, historyValues, values, ...rest } = series;
  return withField(
    withField(JSON.stringify(rest), 'values', `"${encodeFloats(values)}"`),
    'history',
    historyText(historySteps, historyValues),
  );
}

/** Marks a window's values written as the base64 of their float64 bytes (little-endian, as every host here). */
const FLOATS_PREFIX = 'f64:';

/**
 * A window's values as the base64 of their IEEE bytes: exact (NaN, ±Infinity and -0 included) and far cheaper
 * than printing 500 doubles as decimal text every tick, which led the quiet tick's profile.
 */
function encodeFloats(values: readonly number[]): string {
  const floats = Float64Array.from(values);
  return `${FLOATS_PREFIX}${Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength).toString('base64')}`;
}

function decodeFloats(text: string): number[] {
  const bytes = Buffer.from(text.slice(FLOATS_PREFIX.length), 'base64');
  const floats = new Float64Array(Math.floor(bytes.length / 8));
  // Copied into a fresh buffer: a decoded Buffer need not start on an 8-byte boundary.
  new Uint8Array(floats.buffer).set(bytes.subarray(0, floats.length * 8));
  return Array.from(floats);
}

/** Each live history's JSON text so far (without brackets) and how many pairs it covers. */
const historyTexts = new WeakMap<number[], { pairs: number; text: string }>();

/** The history as JSON pairs `[[step, value], …]`, the stored format. Keyed by its steps array. */
function historyText(historySteps: number[], historyValues: readonly number[]): string {
  let known = historyTexts.get(historySteps);
  if (known === undefined || known.pairs > historySteps.length) known = { pairs: 0, text: '' };
  const pieces: string[] = known.pairs === 0 ? [] : [known.text];
  for (let index = known.pairs; index < historySteps.length; index++) {
    const step = historySteps[index] as number;
    const value = historyValues[index] as number;
    pieces.push(`[${JSON.stringify(step)},${JSON.stringify(encodeNumber(value))}]`);
  }
  // join makes one flat string; appending with `+` would build a rope that every write walks again.
  const text = pieces.join(',');
  historyTexts.set(historySteps, { pairs: historySteps.length, text });
  return `[${text}]`;
}

/** Inverse of `serialiseRollingState`'s encoding, in place on freshly parsed JSON. */
export function decodeRollingState(value: RollingState): RollingState {
  for (const series of Object.values(value.metrics)) {
    unpackHistory(series);
    const values: unknown = series.values;
    if (typeof values === 'string')
      series.values = values.startsWith(FLOATS_PREFIX) ? decodeFloats(values) : [];
    if (!(series.nonFinite > 0)) continue;
    for (let index = 0; index < series.values.length; index++) {
      if (typeof series.values[index] !== 'number') series.values[index] = decodeNumber(series.values[index]);
    }
  }
  for (const [name, raw] of Object.entries(value.lastMetrics)) value.lastMetrics[name] = decodeNumber(raw);
  return value;
}

/** The stored `history` pairs into the two flat arrays (non-finite values were written as words). */
function unpackHistory(series: SeriesState): void {
  const stored = series as SeriesState & { history?: unknown };
  const pairs = Array.isArray(stored.history) ? (stored.history as unknown[]) : [];
  delete stored.history;
  const steps: number[] = [];
  const values: number[] = [];
  for (const pair of pairs) {
    if (!Array.isArray(pair) || typeof pair[0] !== 'number') continue;
    steps.push(pair[0]);
    values.push(decodeNumber(pair[1]));
  }
  series.historySteps = steps;
  series.historyValues = values;
}
