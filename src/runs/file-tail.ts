import { open } from 'node:fs/promises';
import { z } from 'zod';

/**
 * Reading the end of run files (metrics.jsonl, output.log) without reading the whole file: a run's
 * files grow for days, `status` must stay cheap.
 */

/** Last `count` complete-or-final lines of a file, reading at most `maxBytes` from its end. */
export async function tailLines(filePath: string, count: number, maxBytes = 64 * 1024): Promise<string[]> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(filePath, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  try {
    const { size } = await handle.stat();
    const length = Math.min(size, maxBytes);
    if (length === 0) return [];
    const buffer = Buffer.alloc(length);
    await handle.read(buffer, 0, length, size - length);
    const lines = buffer.toString('utf8').split('\n');
    // The first line may be cut by the byte window; drop it unless we read from the file start.
    if (length < size) lines.shift();
    while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
    return lines.slice(-count);
  } finally {
    await handle.close();
  }
}

/** One line of metrics.jsonl: `ts` (epoch seconds), `step`, and numeric metrics (NaN/±Infinity allowed). */
export interface MetricRecord {
  ts?: number;
  step?: number;
  values: Record<string, number>;
}

const metricLineSchema = z.record(z.string(), z.union([z.number(), z.string(), z.null(), z.boolean()]));
const SPECIAL_NUMBERS: Record<string, number> = {
  NaN: Number.NaN,
  Infinity: Number.POSITIVE_INFINITY,
  '-Infinity': Number.NEGATIVE_INFINITY,
};
const SPECIAL_MARKER = '@@shepherd-special@@';

/**
 * Parse a metrics line as Python's `json` writes it (bare `NaN`, `Infinity`, `-Infinity` allowed).
 * Returns undefined for a malformed line.
 */
export function parseMetricLine(line: string): MetricRecord | undefined {
  const trimmed = line.trim();
  if (trimmed === '') return undefined;
  // Quote bare special numbers that sit in value position so JSON.parse accepts the line.
  const quoted = trimmed.replace(
    /([:[,]\s*)(-?Infinity|NaN)(\s*[,}\]])/g,
    (_match, before: string, word: string, after: string) => `${before}"${SPECIAL_MARKER}${word}"${after}`,
  );
  let raw: unknown;
  try {
    raw = JSON.parse(quoted);
  } catch {
    return undefined;
  }
  const parsed = metricLineSchema.safeParse(raw);
  if (!parsed.success) return undefined;
  const values: Record<string, number> = {};
  let ts: number | undefined;
  let step: number | undefined;
  for (const [key, value] of Object.entries(parsed.data)) {
    let number: number | undefined;
    if (typeof value === 'number') number = value;
    else if (typeof value === 'string' && value.startsWith(SPECIAL_MARKER)) {
      number = SPECIAL_NUMBERS[value.slice(SPECIAL_MARKER.length)];
    }
    if (number === undefined) continue;
    if (key === 'ts') ts = number;
    else if (key === 'step') step = number;
    else values[key] = number;
  }
  const record: MetricRecord = { values };
  if (ts !== undefined) record.ts = ts;
  if (step !== undefined) record.step = step;
  return record;
}

/** Last `count` parseable metric records of a metrics.jsonl file. */
export async function readLastMetrics(filePath: string, count: number): Promise<MetricRecord[]> {
  const lines = await tailLines(filePath, count * 4 + 4, 256 * 1024);
  const records = lines.map(parseMetricLine).filter((record) => record !== undefined);
  return records.slice(-count);
}
