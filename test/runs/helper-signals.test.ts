import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PYTHON_RUNTIME_DIR } from '../../src/runs/records/run-files.js';
import { removeTree } from '../helpers/processes.js';

/**
 * The helper's signals (issue 22): with SHEPHERD_STOP_SIGNAL=USR1 (Slurm's warning before the time limit)
 * SIGUSR1 runs the on_stop callbacks and records `wallTime` in finish.json; a script that handles SIGUSR2
 * itself keeps its handler (the hang dump does not take it over).
 */
const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0)) removeTree(directory);
});

function start(script: string, environment: Record<string, string>) {
  const runDir = mkdtempSync(join(tmpdir(), 'shepherd-helper-signals-'));
  directories.push(runDir);
  let output = '';
  const child = spawn('python3', ['-u', '-c', script], {
    cwd: runDir,
    env: { ...process.env, PYTHONPATH: PYTHON_RUNTIME_DIR, SHEPHERD_RUN_DIR: runDir, ...environment },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { runDir, child, exited, output: () => output };
}

const LOOP = `import time, shepherd
shepherd.on_stop(lambda: shepherd.save_checkpoint(7, "ckpt.txt"))
print("ready", flush=True)
while True:
    time.sleep(0.05)
`;

describe('helper signals', () => {
  it('stops on SIGUSR1 with SHEPHERD_STOP_SIGNAL=USR1: checkpoint, finish.json wallTime, exit 0', async () => {
    const run = start(LOOP, { SHEPHERD_STOP_SIGNAL: 'USR1' });
    await vi.waitFor(() => expect(run.output()).toContain('ready'), { timeout: 15_000 });
    run.child.kill('SIGUSR1');
    expect(await run.exited).toBe(0);
    expect(run.output()).toContain("received SIGUSR1 (the job's time limit is near)");
    const finish = JSON.parse(readFileSync(join(run.runDir, 'finish.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(finish).toMatchObject({ stopped: true, wallTime: true });
    expect(JSON.parse(readFileSync(join(run.runDir, 'resume.json'), 'utf8'))).toMatchObject({ step: 7 });
  });

  it("leaves a script's own SIGUSR2 handler alone and records no hang-dump pid", async () => {
    const run = start(
      `import signal, time\nsignal.signal(signal.SIGUSR2, lambda *a: print("mine", flush=True))\nimport shepherd\nprint("ready", flush=True)\ntime.sleep(30)\n`,
      {},
    );
    await vi.waitFor(() => expect(run.output()).toContain('ready'), { timeout: 15_000 });
    run.child.kill('SIGUSR2');
    await vi.waitFor(() => expect(run.output()).toContain('mine'), { timeout: 10_000 });
    expect(() => readFileSync(join(run.runDir, '.shepherd', 'stack-signal.jsonl'), 'utf8')).toThrow();
    run.child.kill('SIGKILL');
    await run.exited;
  });
});
