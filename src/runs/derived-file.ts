import { open, stat, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { RUN_FILES } from './records/run-files.js';

/**
 * Points read from output.log are also written to `stdout-metrics.jsonl` in the run directory, in the
 * metrics.jsonl format plus `"source": "stdout"`, so `chart`, `status` and anything else that reads a
 * run's metrics file see them. The monitor owns the file: it records how many bytes it committed and cuts
 * anything beyond that before appending, so a tick that failed after writing and is retried never leaves a
 * point twice.
 */

export const STDOUT_METRICS_FILE = RUN_FILES.stdoutMetrics;

function formatValue(value: number): string {
  if (Number.isFinite(value)) return String(value);
  return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity';
}

/**
 * One metrics line: `{"step": 10, "source": "stdout", "loss": 0.52}`; NaN/Infinity as Python writes them.
 * `source` is `tfevents` for points read from TensorBoard event files, `mlflow` for MLflow's file store.
 */
export function formatDerivedLine(
  step: number,
  metrics: Record<string, number>,
  source: 'stdout' | 'tfevents' | 'mlflow' = 'stdout',
): string {
  let line = `{"step": ${formatValue(step)}, "source": "${source}"`;
  for (const [name, value] of Object.entries(metrics))
    line += `, ${JSON.stringify(name)}: ${formatValue(value)}`;
  return `${line}}\n`;
}

/** Append `text` after the first `committedBytes` of the file; returns the new committed size. */
export async function appendDerived(runDir: string, committedBytes: number, text: string): Promise<number> {
  const path = join(runDir, STDOUT_METRICS_FILE);
  try {
    if ((await stat(path)).size > committedBytes) await truncate(path, committedBytes);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  if (text.length === 0) return committedBytes;
  const handle = await open(path, 'a');
  try {
    await handle.write(text);
  } finally {
    await handle.close();
  }
  return committedBytes + Buffer.byteLength(text);
}

/**
 * The metrics file to read for a run: the helper's metrics.jsonl when it has any content (the helper's
 * points win), else the points parsed from output.log.
 */
export async function metricsFileOf(runDir: string): Promise<{ path: string; source: 'helper' | 'stdout' }> {
  const helper = join(runDir, RUN_FILES.metrics);
  try {
    if ((await stat(helper)).size > 0) return { path: helper, source: 'helper' };
  } catch {
    // no helper file: fall through
  }
  try {
    const derived = join(runDir, STDOUT_METRICS_FILE);
    if ((await stat(derived)).size > 0) return { path: derived, source: 'stdout' };
  } catch {
    // neither: report the helper's path, which readers treat as "no metrics yet"
  }
  return { path: helper, source: 'helper' };
}
