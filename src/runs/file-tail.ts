import { open } from 'node:fs/promises';
import { parseMetricLine as parseMetricPoint } from './metric-line.js';

/**
 * Reading the end of run files (metrics.jsonl, output.log) without reading the whole file: a run's
 * files grow for days, `status` must stay cheap.
 */

/** The last `maxBytes` of a file as text ('' when it does not exist). */
export async function readTail(filePath: string, maxBytes: number): Promise<string> {
  return (await tailLines(filePath, Number.MAX_SAFE_INTEGER, maxBytes)).join('\n');
}

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

/**
 * Parse a metrics line as Python's `json` writes it (bare `NaN`, `Infinity`, `-Infinity` allowed), with
 * the monitor's parser so both read the protocol the same way. Returns undefined for a malformed line.
 */
export function parseMetricLine(line: string): MetricRecord | undefined {
  const parsed = parseMetricPoint(line);
  if (!parsed.ok) return undefined;
  const record: MetricRecord = { values: parsed.point.metrics };
  if (parsed.point.step !== undefined) record.step = parsed.point.step;
  // MetricRecord keeps Python's epoch seconds.
  if (parsed.point.ts !== undefined) record.ts = parsed.point.ts / 1000;
  return record;
}

/** Last `count` parseable metric records of a metrics.jsonl file. */
export async function readLastMetrics(filePath: string, count: number): Promise<MetricRecord[]> {
  const lines = await tailLines(filePath, count * 4 + 4, 256 * 1024);
  const records = lines.map(parseMetricLine).filter((record) => record !== undefined);
  return records.slice(-count);
}
