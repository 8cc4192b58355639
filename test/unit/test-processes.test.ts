import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { readProcessStat } from '../../src/runs/process-table.js';
import { endProcessGroups, launchedGroups } from '../helpers/processes.js';
import { testRunMeta } from '../helpers/run-meta.js';

/** The harness ends what its app launched before removing the data dir; it must never hit a reused pid. */
describe('test harness: ending a test app’s run processes', () => {
  it('ends the group whose leader is the launched process, and leaves a pid with another start time alone', async () => {
    const child = spawn('/usr/bin/python3', ['-c', 'import time; time.sleep(60)'], {
      detached: true,
      stdio: 'ignore',
    });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const pid = child.pid as number;
    try {
      const startTime = readProcessStat(pid)?.startTime;
      expect(startTime).toBeDefined();
      const ours = testRunMeta('r-ours', { pgid: pid, pid, processStartTime: startTime as string });
      const reused = testRunMeta('r-reused', { pgid: pid, pid, processStartTime: '1' });
      const finished = testRunMeta('r-old', { status: 'completed' });
      expect(launchedGroups([reused, finished])).toEqual([]);
      expect(launchedGroups([ours, reused, finished])).toEqual([pid]);

      await endProcessGroups(launchedGroups([ours]));
      await exited;
      expect(child.signalCode).toBe('SIGKILL');
    } finally {
      if (child.exitCode === null && child.signalCode === null) process.kill(-pid, 'SIGKILL');
    }
  });
});
