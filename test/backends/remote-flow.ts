import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Shared by the remote-backend playground flows (Kubernetes, HF Jobs). */

/** Polls `probe` until it gives a value; fails naming `what` after `timeoutMs`. */
export async function until<T>(
  probe: () => T | undefined | false,
  what: string,
  timeoutMs = 45_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = probe();
    if (value !== undefined && value !== false) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

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
