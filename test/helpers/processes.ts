import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { readProcessStat } from '../../src/runs/process-table.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * The process groups of `runs` whose leader is still the process the run launched (same start time, so a
 * reused pid is never taken for it).
 */
export function launchedGroups(runs: readonly Pick<RunMeta, 'pgid' | 'processStartTime'>[]): number[] {
  return runs.flatMap((run) => {
    if (run.pgid === undefined || run.processStartTime === undefined) return [];
    return readProcessStat(run.pgid)?.startTime === run.processStartTime ? [run.pgid] : [];
  });
}

/**
 * SIGKILL each process group a test's app launched (known by its recorded pgid, never by name) and wait,
 * up to `timeoutMs`, until none is left, so nothing still writes into a directory the test removes.
 */
export async function endProcessGroups(pgids: readonly number[], timeoutMs = 5_000): Promise<void> {
  const alive = pgids.filter(groupAlive);
  for (const pgid of alive) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // Ended between the check and the kill.
    }
  }
  const deadline = Date.now() + timeoutMs;
  while (alive.some(groupAlive) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** `rm -rf`, retried briefly: a launcher that just ended may still be closing a file in the tree. */
export function removeTree(path: string): void {
  rmSync(path, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
}

/** The run records (`runs/<id>/meta.json`) under a data directory, read from disk: Redis may be gone. */
export function runsOnDisk(dataDir: string): Pick<RunMeta, 'pgid' | 'processStartTime'>[] {
  let entries: string[];
  try {
    entries = readdirSync(join(dataDir, 'runs'));
  } catch {
    return [];
  }
  return entries.flatMap((entry) => {
    try {
      return [JSON.parse(readFileSync(join(dataDir, 'runs', entry, 'meta.json'), 'utf8')) as RunMeta];
    } catch {
      return [];
    }
  });
}
