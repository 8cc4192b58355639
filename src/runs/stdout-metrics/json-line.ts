import { parseMetricLine } from '../metric-line.js';
import type { PrintedMetrics, StdoutFormat } from './types.js';
import * as types from './types.js';

// A local binding: under tsx every use of an imported name is a getter call.
const { printedMetrics } = types;

/**
 * A JSON object on a line (`{"step": 10, "loss": 0.52}`), read as metrics.jsonl is: numbers are metrics,
 * `step`-like keys the step, timestamps skipped, a nested `metrics` object merged. Plain JSON.parse first;
 * lines with Python's bare NaN/Infinity go through the metrics.jsonl parser, which accepts them. The helper's
 * own printed form, `[metrics] {...}` (outside Shepherd, or in a pod whose files Shepherd cannot see), too.
 */

const HELPER_PREFIX = '[metrics] ';

const STEP_NAMES = ['step', '_step', 'global_step', 'iteration'];
const SKIPPED = new Set(['ts', 'time', 'timestamp', '_ts', '_time', ...STEP_NAMES]);
const MAX_METRICS = 64;

/**
 * Adds `source`'s numbers to `metrics` (up to MAX_METRICS in all); returns the new count. A plain function:
 * a closure bound to a name per line costs tsx's name-keeping wrapper (~1 µs) on every printed line.
 */
function addNumbers(metrics: Record<string, number>, source: Record<string, unknown>, count: number): number {
  let added = count;
  for (const key in source) {
    const raw = source[key];
    if (typeof raw !== 'number' || SKIPPED.has(key) || added >= MAX_METRICS) continue;
    metrics[key] = raw;
    added++;
  }
  return added;
}

function fromObject(value: Record<string, unknown>): PrintedMetrics | undefined {
  const metrics: Record<string, number> = {};
  let count = 0;
  let step: number | undefined;
  for (const key of STEP_NAMES) {
    const candidate = value[key];
    if (typeof candidate === 'number' && Number.isFinite(candidate)) {
      step = candidate;
      break;
    }
  }
  count = addNumbers(metrics, value, count);
  const nested = value.metrics;
  if (typeof nested === 'object' && nested !== null && !Array.isArray(nested))
    count = addNumbers(metrics, nested as Record<string, unknown>, count);
  return count === 0 && step === undefined ? undefined : printedMetrics(metrics, step);
}

export const jsonLineFormat: StdoutFormat = {
  name: 'json',
  parse(printed: string): PrintedMetrics | undefined {
    const line =
      printed.charCodeAt(0) === 91 /* [ */ && printed.startsWith(HELPER_PREFIX)
        ? printed.slice(HELPER_PREFIX.length)
        : printed;
    if (line.charCodeAt(0) !== 123 /* { */ || line.charCodeAt(1) === 39 /* ' */) return undefined;
    if (line.charCodeAt(line.length - 1) !== 125 /* } */) return undefined;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      const parsed = parseMetricLine(line);
      if (!parsed.ok) return undefined;
      return printedMetrics(parsed.point.metrics, parsed.point.step);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    return fromObject(value as Record<string, unknown>);
  },
};
