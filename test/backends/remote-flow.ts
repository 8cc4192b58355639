import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { untilEvery } from '../helpers/until.js';

/** Shared by the remote-backend playground flows (Kubernetes, HF Jobs). */

export const until = untilEvery({ timeoutMs: 45_000, intervalMs: 100 });

/** A run's output.log ('' before the backend wrote any of it). */
export function outputOf(dataDir: string, runId: string): string {
  try {
    return readFileSync(join(dataDir, 'runs', runId, 'output.log'), 'utf8');
  } catch {
    return '';
  }
}

/** Every `step=N` line of a log, in order (a duplicate means a replayed stream was written twice). */
export const steps = (log: string): number[] =>
  [...log.matchAll(/^step=(\d+) /gm)].map((match) => Number(match[1]));
