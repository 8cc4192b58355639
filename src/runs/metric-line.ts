/**
 * Parser for one `metrics.jsonl` line. Python's `json` module writes non-finite floats as the bare words
 * `NaN`, `Infinity` and `-Infinity`, which `JSON.parse` rejects; we rewrite them (outside string literals
 * only) into sentinel strings and turn those back into numbers with a reviver.
 */

export interface MetricPoint {
  /** Wall-clock time of the point in epoch milliseconds, when the line carried one. */
  ts?: number;
  /** Training step; undefined when the line had none (the caller numbers it). */
  step?: number;
  metrics: Record<string, number>;
}

type MetricLineResult = { ok: true; point: MetricPoint } | { ok: false; reason: string };

// A per-process nonce makes a collision with a real string value practically impossible.
const nonce = Math.random().toString(36).slice(2, 10);
const SENTINELS: Record<string, number> = {
  [`\u0000nan-${nonce}`]: Number.NaN,
  [`\u0000inf-${nonce}`]: Number.POSITIVE_INFINITY,
  [`\u0000-inf-${nonce}`]: Number.NEGATIVE_INFINITY,
};
const NAN_TOKEN = JSON.stringify(`\u0000nan-${nonce}`);
const INF_TOKEN = JSON.stringify(`\u0000inf-${nonce}`);
const NEG_INF_TOKEN = JSON.stringify(`\u0000-inf-${nonce}`);

const TIME_KEYS = ['ts', 'time', 'timestamp', '_ts', '_time'];
const STEP_KEYS = ['step', '_step', 'global_step', 'iteration'];
const NOT_METRICS = new Set([...TIME_KEYS, ...STEP_KEYS]);
const MAX_LINE_CHARS = 64 * 1024;
const MAX_METRICS_PER_LINE = 64;

/** Rewrite bare NaN / Infinity / -Infinity outside strings; returns undefined when nothing changed. */
function rewriteNonFinite(line: string): string {
  let output = '';
  let copiedUpTo = 0;
  let inString = false;
  for (let index = 0; index < line.length; index++) {
    const char = line.charCodeAt(index);
    if (inString) {
      if (char === 92 /* \ */) index++;
      else if (char === 34 /* " */) inString = false;
      continue;
    }
    if (char === 34) {
      inString = true;
      continue;
    }
    let token: string | undefined;
    let length = 0;
    if (char === 78 /* N */ && line.startsWith('NaN', index)) {
      token = NAN_TOKEN;
      length = 3;
    } else if (char === 73 /* I */ && line.startsWith('Infinity', index)) {
      token = INF_TOKEN;
      length = 8;
    } else if (char === 45 /* - */ && line.startsWith('-Infinity', index)) {
      token = NEG_INF_TOKEN;
      length = 9;
    }
    if (token !== undefined) {
      output += line.slice(copiedUpTo, index) + token;
      index += length - 1;
      copiedUpTo = index + 1;
    }
  }
  return copiedUpTo === 0 ? line : output + line.slice(copiedUpTo);
}

function reviver(_key: string, value: unknown): unknown {
  if (typeof value === 'string' && value.charCodeAt(0) === 0) {
    const number = SENTINELS[value];
    if (number !== undefined) return number;
  }
  return value;
}

function toEpochMs(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) {
    // Seconds (Python's time.time()) vs milliseconds: anything before 2001 in ms is really seconds.
    return value < 1e12 ? value * 1000 : value;
  }
  if (typeof value === 'string') {
    const parsed = Date.parse(value);
    return Number.isNaN(parsed) ? undefined : parsed;
  }
  return undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The line's JSON. Most lines hold no bare non-finite word and no escaped NUL (which a sentinel would start
 * with): those parse without the rewrite and the reviver, which keeps JSON.parse on its fast path, with the
 * same result.
 */
function parseJson(text: string): unknown {
  if (!text.includes('NaN') && !text.includes('Infinity') && !text.includes('\\u0000'))
    return JSON.parse(text);
  return JSON.parse(rewriteNonFinite(text), reviver);
}

/** Copies the numeric fields of `source` but the step and time ones, up to the cap; returns the count. */
function addMetrics(
  metrics: Record<string, number>,
  source: Record<string, unknown>,
  counted: number,
): number {
  let count = counted;
  for (const key in source) {
    if (!Object.hasOwn(source, key) || NOT_METRICS.has(key)) continue;
    const raw = source[key];
    if (typeof raw !== 'number' || count >= MAX_METRICS_PER_LINE) continue;
    metrics[key] = raw;
    count++;
  }
  return count;
}

/**
 * Parse one line. Numeric fields become metrics (a nested `metrics` object is merged in); `step` and a
 * timestamp are recognised under their usual names; strings, booleans and nulls are ignored.
 */
export function parseMetricLine(line: string): MetricLineResult {
  const trimmed = line.trim();
  if (trimmed.length === 0) return { ok: false, reason: 'empty line' };
  if (trimmed.length > MAX_LINE_CHARS)
    return { ok: false, reason: `line longer than ${MAX_LINE_CHARS} chars` };
  let value: unknown;
  try {
    value = parseJson(trimmed);
  } catch (error) {
    return { ok: false, reason: `not JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
  if (!isRecord(value)) return { ok: false, reason: 'not a JSON object' };

  const point: MetricPoint = { metrics: {} };
  for (const key of STEP_KEYS) {
    const step = value[key];
    if (typeof step === 'number' && Number.isFinite(step)) {
      point.step = step;
      break;
    }
  }
  for (const key of TIME_KEYS) {
    const ts = toEpochMs(value[key]);
    if (ts !== undefined) {
      point.ts = ts;
      break;
    }
  }
  let count = addMetrics(point.metrics, value, 0);
  if (isRecord(value.metrics)) count = addMetrics(point.metrics, value.metrics, count);
  if (count === 0 && point.step === undefined) return { ok: false, reason: 'no numeric metric or step' };
  return { ok: true, point };
}

/** State for "report a malformed line once per run": the first one is reported, the rest are counted. */
export interface MalformedBook {
  count: number;
  reported: boolean;
}

/** Record malformed lines; returns a short note the first time only (the caller posts it to the thread). */
export function recordMalformed(
  book: MalformedBook,
  newCount: number,
  firstReason: string | undefined,
  sample: string | undefined,
): string | undefined {
  if (newCount <= 0) return undefined;
  book.count += newCount;
  if (book.reported) return undefined;
  book.reported = true;
  const shown = sample === undefined ? '' : ` (\`${sample.slice(0, 80)}${sample.length > 80 ? '…' : ''}\`)`;
  return `Skipped a malformed line in metrics.jsonl${shown}: ${firstReason ?? 'unreadable'}. Further malformed lines are skipped silently.`;
}
