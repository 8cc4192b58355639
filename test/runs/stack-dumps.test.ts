import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { PYTHON_RUNTIME_DIR } from '../../src/runs/records/run-files.js';
import { dumpLocalStacks, type PySpy } from '../../src/runs/stack-dumps.js';
import { endProcessGroups, removeTree } from '../helpers/processes.js';
import { testRunMeta } from '../helpers/run-meta.js';

/**
 * Hang dumps of local runs, on real process groups: a script that imported the helper gets SIGUSR2 and
 * faulthandler writes its threads into output.log; one without the helper is never signalled (SIGUSR2
 * would kill it) and goes to py-spy, an injected dependency here, or gets nothing when py-spy is absent.
 */
const logger = createLogger('silent');
const groups: number[] = [];
const directories: string[] = [];

/** A process group like a launch: `python -c` (its own leader) starting the script as a child. */
function startGroup(runDir: string, script: string, withHelper: boolean) {
  writeFileSync(join(runDir, 'train.py'), script);
  const log = join(runDir, 'output.log');
  const child = spawn(
    'python3',
    [
      '-c',
      `import subprocess, sys; subprocess.run([sys.executable, "-u", "train.py"], stdout=open(${JSON.stringify(log)}, "a"), stderr=subprocess.STDOUT)`,
    ],
    {
      cwd: runDir,
      detached: true,
      stdio: 'ignore',
      env: {
        ...process.env,
        ...(withHelper ? { PYTHONPATH: PYTHON_RUNTIME_DIR, SHEPHERD_RUN_DIR: runDir } : {}),
      },
    },
  );
  const pid = child.pid ?? 0;
  groups.push(pid);
  return testRunMeta('hang', { pid, pgid: pid });
}

const SCRIPT = (importHelper: boolean) => `${importHelper ? 'import shepherd\n' : ''}import time
print("ready", flush=True)
def all_reduce():
    time.sleep(600)
all_reduce()
`;

afterEach(async () => {
  await endProcessGroups(groups.splice(0));
  for (const directory of directories.splice(0)) removeTree(directory);
});

function runDirectory(): string {
  const directory = mkdtempSync(join(tmpdir(), 'shepherd-stacks-'));
  directories.push(directory);
  mkdirSync(join(directory, '.shepherd'), { recursive: true });
  return directory;
}

const logOf = (runDir: string) => readFileSync(join(runDir, 'output.log'), 'utf8');

describe('local hang dumps', () => {
  it('signals the helper pid: faulthandler writes every thread into output.log', async () => {
    const runDir = runDirectory();
    const meta = startGroup(runDir, SCRIPT(true), true);
    await vi.waitFor(() => expect(logOf(runDir)).toContain('ready'), { timeout: 15_000 });
    const pySpy = vi.fn<PySpy>();
    const how = await dumpLocalStacks(meta, runDir, { pySpy, logger });
    expect(how).toMatch(/^faulthandler \(SIGUSR2 to pid \d+\)$/);
    expect(pySpy).not.toHaveBeenCalled();
    await vi.waitFor(() => expect(logOf(runDir)).toMatch(/line 5 in all_reduce/), { timeout: 10_000 });
  });

  it('uses py-spy for a script without the helper, and nothing when py-spy is absent', async () => {
    const runDir = runDirectory();
    const meta = startGroup(runDir, SCRIPT(false), false);
    await vi.waitFor(() => expect(logOf(runDir)).toContain('ready'), { timeout: 15_000 });
    expect(await dumpLocalStacks(meta, runDir, { pySpy: undefined, logger })).toBeUndefined();
    expect(await dumpLocalStacks(meta, runDir, { pySpy: async () => undefined, logger })).toBeUndefined();
    const asked: number[] = [];
    const pySpy: PySpy = async (pid) => {
      asked.push(pid);
      return `Thread ${pid} (idle): "MainThread"\n    all_reduce (train.py:4)\n    <module> (train.py:5)\n`;
    };
    const how = await dumpLocalStacks(meta, runDir, { pySpy, logger });
    expect(how).toBe(`py-spy (pid ${asked.join(', ')})`);
    // The script (not the group leader, the launcher's place) was dumped, and it is still alive.
    expect(asked).toHaveLength(1);
    expect(asked[0]).not.toBe(meta.pgid);
    expect(logOf(runDir)).toContain(`[shepherd] py-spy dump --pid ${asked[0]}\nThread`);
    expect(() => process.kill(asked[0] ?? 0, 0)).not.toThrow();
  });
});
