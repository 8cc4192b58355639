import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ALICE, BOB, createHarness, type Harness, waitFor } from '../runs/harness.js';

/**
 * Starts two escapees: a child that called setsid (start_new_session) and a daemon (double fork +
 * setsid, orphaned at once). Each writes its pid to a file and sleeps for ten minutes.
 */
const escapees = (onTerm: 'save' | 'ignore' | 'finish') => `import os, signal, subprocess, sys, time, shepherd
SLEEPER = "import os, sys, time\\nopen(sys.argv[1], 'w').write(str(os.getpid()))\\ntime.sleep(600)"
subprocess.Popen([sys.executable, "-c", SLEEPER, "setsid.pid"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", SLEEPER, "daemon.pid"])
    os._exit(0)
os.wait()
${onTerm === 'ignore' ? 'signal.signal(signal.SIGTERM, signal.SIG_IGN)' : 'shepherd.on_stop(lambda: None)'}
for step in range(1, ${onTerm === 'finish' ? 20 : 100000}):
    shepherd.log_metrics(step=step, loss=1.0 / step)
    time.sleep(0.05)
shepherd.finish()
`;

/** Alive means: the pid exists and is not a zombie. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

let harness: Harness;
const started: number[] = [];
beforeEach(async () => {
  harness = await createHarness();
});
afterEach(async () => {
  // Only the escapees this test started, by pid.
  for (const pid of started.splice(0)) if (alive(pid)) process.kill(pid, 'SIGKILL');
  await harness.cleanup();
});

async function escapeePids(runId: string): Promise<number[]> {
  const directory = harness.runtime.store.runDir(runId);
  const pids = await waitFor(() => {
    const files = ['setsid.pid', 'daemon.pid'].map((name) => path.join(directory, name));
    if (!files.every((file) => existsSync(file) && readFileSync(file, 'utf8') !== '')) return undefined;
    return files.map((file) => Number(readFileSync(file, 'utf8')));
  });
  started.push(...pids);
  return pids;
}

async function launch(name: string, script: string) {
  const { service } = harness.runtime;
  const created = await service.createRun({
    name,
    script,
    gpus: 1,
    threadId: 'web:local:t',
    requester: ALICE,
  });
  await service.approve(created.id, BOB);
  return created;
}

describe('nothing escapes stop (issue 10 item 10)', () => {
  it('stop ends a setsid child and an orphaned setsid daemon of a run that saves on SIGTERM', async () => {
    const run = await launch('escape-save', escapees('save'));
    const pids = await escapeePids(run.id);
    expect(pids.every(alive)).toBe(true);
    await harness.runtime.service.stop(run.id, BOB);
    await waitFor(() => !pids.some(alive), 10_000, 'the escapees to be gone');
    expect(pids.map(alive)).toEqual([false, false]);
  });

  it('stop ends them too when the run ignores SIGTERM and is killed after the grace period', async () => {
    const run = await launch('escape-ignore', escapees('ignore'));
    const pids = await escapeePids(run.id);
    await harness.runtime.service.stop(run.id, BOB);
    await waitFor(() => !pids.some(alive), 10_000, 'the escapees to be gone');
    expect(pids.map(alive)).toEqual([false, false]);
  });

  it('a run that finishes on its own leaves no setsid process behind', async () => {
    const run = await launch('escape-finish', escapees('finish'));
    const pids = await escapeePids(run.id);
    const done = await waitFor(async () => {
      await harness.runtime.service.refresh();
      const meta = await harness.runtime.find(run.id);
      return meta.status === 'completed' ? meta : undefined;
    });
    expect(done.exitCode).toBe(0);
    expect(pids.map(alive)).toEqual([false, false]);
  });
});
