import type { Dirent } from 'node:fs';
import { open, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EventPoint } from './event-files.js';

/**
 * MLflow's file store (`mlruns/<experiment>/<run>/metrics/<name>`, one line `timestamp value step` per
 * logged value; a name with `/` is a nested file), read incrementally like output.log: each metric file
 * has a cursor (inode and offset of the first byte not yet read); a last line without its newline waits.
 * Only MLflow runs whose `meta.yaml` is not older than the Shepherd launch are read, so an old run in a
 * shared `mlruns/` is not mixed in.
 */

interface MetricFileCursor {
  ino: string;
  offset: number;
}

/** Absolute path of a metric file → cursor. */
export type MlflowCursors = Record<string, MetricFileCursor>;

interface MetricValue {
  step: number;
  value: number;
}

/** `meta.yaml` may be written a little before the launch is stamped (clock granularity, slow spawn). */
const LAUNCH_SLACK_MS = 2000;
const MAX_ENTRIES = 5000;
const MAX_METRIC_DEPTH = 4;

function parseNumber(text: string): number | undefined {
  const lower = text.toLowerCase();
  // Python writes str(float): `nan`, `inf`, `-inf`.
  if (lower === 'nan' || lower === '-nan') return Number.NaN;
  if (lower === 'inf' || lower === 'infinity' || lower === '+inf') return Number.POSITIVE_INFINITY;
  if (lower === '-inf' || lower === '-infinity') return Number.NEGATIVE_INFINITY;
  if (!/^[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?$/i.test(text)) return undefined;
  return Number(text);
}

/**
 * The complete lines of a metric file's new text: `timestamp value step` (old MLflow wrote no step: 0).
 * `consumed` counts the bytes of the complete lines; a torn last line is left for the next read. A line
 * that is not two or three numbers is skipped.
 */
export function parseMlflowMetricLines(chunk: Buffer): { values: MetricValue[]; consumed: number } {
  const end = chunk.lastIndexOf(0x0a);
  if (end === -1) return { values: [], consumed: 0 };
  const values: MetricValue[] = [];
  for (const line of chunk.toString('utf8', 0, end).split('\n')) {
    const parts = line.trim().split(/\s+/);
    if (parts.length < 2 || parts.length > 3) continue;
    const value = parseNumber(parts[1] as string);
    const step = parts.length === 3 ? Number(parts[2]) : 0;
    if (value === undefined || !Number.isSafeInteger(step) || !/^-?\d+$/.test(parts[0] as string)) continue;
    values.push({ step, value });
  }
  return { values, consumed: end + 1 };
}

/** `MLFLOW_TRACKING_URI` as a local directory (`file:` URI or a bare path), relative to `cwd`; else undefined. */
export function mlflowStoreOf(trackingUri: string | undefined, cwd: string): string | undefined {
  if (trackingUri === undefined || trackingUri.trim() === '') return undefined;
  const uri = trackingUri.trim();
  if (uri.startsWith('file://')) {
    try {
      return fileURLToPath(uri);
    } catch {
      return undefined;
    }
  }
  if (uri.startsWith('file:')) return path.resolve(cwd, uri.slice('file:'.length));
  // Any other scheme (http, databricks, sqlite…) is not a file store.
  if (/^[a-z][a-z0-9+.-]*:/i.test(uri)) return undefined;
  return path.resolve(cwd, uri);
}

async function directories(directory: string): Promise<Dirent[]> {
  try {
    return (await readdir(directory, { withFileTypes: true })).filter(
      (entry) => entry.isDirectory() && !entry.name.startsWith('.'),
    );
  } catch {
    return [];
  }
}

/** The metric files of the MLflow runs in `store` started since `since` (ms), or already being read. */
async function findMetricFiles(
  store: string,
  since: number,
  cursors: MlflowCursors,
): Promise<Array<{ file: string; name: string }>> {
  const found: Array<{ file: string; name: string }> = [];
  let budget = MAX_ENTRIES;
  async function walkMetrics(root: string, relative: string, depth: number): Promise<void> {
    let entries: Dirent[];
    try {
      entries = await readdir(path.join(root, relative), { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      if (--budget < 0) return;
      const name = relative === '' ? entry.name : `${relative}/${entry.name}`;
      if (entry.isFile()) found.push({ file: path.join(root, name), name });
      else if (entry.isDirectory() && depth < MAX_METRIC_DEPTH) await walkMetrics(root, name, depth + 1);
    }
  }
  for (const experiment of await directories(store)) {
    for (const run of await directories(path.join(store, experiment.name))) {
      if (--budget < 0) return found;
      const runPath = path.join(store, experiment.name, run.name);
      const metrics = path.join(runPath, 'metrics');
      const reading = Object.keys(cursors).some((file) => file.startsWith(`${metrics}${path.sep}`));
      if (!reading) {
        const meta = await stat(path.join(runPath, 'meta.yaml')).catch(() => undefined);
        if (meta === undefined || meta.mtimeMs < since - LAUNCH_SLACK_MS) continue;
      }
      await walkMetrics(metrics, '', 1);
    }
  }
  return found;
}

/** The new complete lines of one metric file from its cursor, at most `maxBytes`. */
async function readMetricFile(
  file: string,
  cursor: MetricFileCursor | undefined,
  maxBytes: number,
): Promise<{ cursor?: MetricFileCursor; values: MetricValue[]; more: boolean }> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, 'r');
  } catch {
    return definedCursor(cursor, [], false);
  }
  try {
    const stats = await handle.stat({ bigint: true });
    const ino = stats.ino.toString();
    const size = Number(stats.size);
    // A replaced or truncated file is read again from its start.
    const start = cursor !== undefined && cursor.ino === ino && cursor.offset <= size ? cursor.offset : 0;
    const length = Math.min(size - start, maxBytes);
    if (length <= 0) return { cursor: { ino, offset: start }, values: [], more: false };
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, start);
    const { values, consumed } = parseMlflowMetricLines(buffer.subarray(0, bytesRead));
    return {
      cursor: { ino, offset: start + consumed },
      values,
      more: bytesRead === maxBytes && consumed > 0 && start + consumed < size,
    };
  } finally {
    await handle.close();
  }
}

function definedCursor(cursor: MetricFileCursor | undefined, values: MetricValue[], more: boolean) {
  return cursor === undefined ? { values, more } : { cursor, values, more };
}

/**
 * The points new in the metric files of the MLflow runs under the `stores` (each an `mlruns/` directory)
 * since `cursors` (updated in place), at most `maxBytes` per file, in step order, one point per step.
 * `since` is the launch time (ms): older MLflow runs are not read.
 */
export async function readMlflowPoints(
  stores: readonly string[],
  cursors: MlflowCursors,
  since: number,
  maxBytes: number,
): Promise<{ points: EventPoint[]; more: boolean }> {
  const byStep = new Map<number, Record<string, number>>();
  let more = false;
  const seen = new Set<string>();
  for (const store of stores) {
    for (const { file, name } of await findMetricFiles(store, since, cursors)) {
      if (seen.has(file)) continue;
      seen.add(file);
      const result = await readMetricFile(file, cursors[file], maxBytes);
      if (result.cursor !== undefined) cursors[file] = result.cursor;
      more ||= result.more;
      for (const { step, value } of result.values) {
        const metrics = byStep.get(step) ?? {};
        byStep.set(step, metrics);
        metrics[name] = value;
      }
    }
  }
  const points = [...byStep.entries()]
    .sort(([a], [b]) => a - b)
    .map(([step, metrics]) => ({ step, metrics }));
  return { points, more };
}
