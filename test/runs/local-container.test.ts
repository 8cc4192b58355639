/**
 * Local runs in an image (`SHEPHERD_LOCAL_CONTAINER=podman`): the local executor starts a real stdlib
 * Python run inside a real Podman container through its real launcher. The helper is mounted, metrics
 * reach the run directory and output.log, pause reaches the script's SIGTERM handler exactly once (it
 * checkpoints, and the relaunch resumes from it), and the time limit and a hard stop remove the container.
 * Needs Podman able to run containers here; skipped with the reason otherwise. GPUs cannot be tested
 * here (no GPU): their flags are covered in test/unit/container-argv.test.ts.
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import type { Executor, ProcessState } from '../../src/runs/executor.js';
import { createLocalExecutor } from '../../src/runs/local-executor.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { lookupRunUser } from '../../src/runs/run-as-user.js';
import { containersNamed, podmanSetup, removeContainer, TEST_IMAGE } from '../helpers/podman.js';
import { endProcessGroups, removeTree } from '../helpers/processes.js';
import { testRunMeta } from '../helpers/run-meta.js';
import { ensureRunUser, RUN_USER } from '../helpers/run-user.js';
import { waitFor } from './harness.js';

const silentLogger = createLogger('silent');
const setup = podmanSetup();
const skipReason = typeof setup === 'string' ? setup : undefined;
if (skipReason !== undefined) process.stderr.write(`local container tests skipped: ${skipReason}\n`);

/** Trains "forever"; on SIGTERM it saves a checkpoint (once) and exits 0, as a script with shepherd.on_stop does. */
const TRAIN = `import os, signal, sys, time
import shepherd

handled = []
resume = shepherd.resume_info() or {}
start = resume.get("step") or 0
if start:
    print("resumed from step %d" % start, flush=True)
print("inside: container=%s uid=%d home=%s cuda=[%s] marker=%s run_dir=%s" % (
    os.path.exists("/run/.containerenv"), os.getuid(), os.environ.get("HOME"),
    os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("SHEPHERD_TEST_MARKER"),
    os.environ.get("SHEPHERD_RUN_DIR")), flush=True)
step = start

def save(signum, frame):
    handled.append(signum)
    print("SIGTERM handler %d at step %d" % (len(handled), step), flush=True)
    os.makedirs("ckpt", exist_ok=True)
    with open("ckpt/step%d.txt" % step, "w") as handle:
        handle.write("weights")
    shepherd.save_checkpoint(step, "ckpt/step%d.txt" % step)
    shepherd.finish()
    sys.exit(0)

if os.environ.get("IGNORE_SIGTERM") == "1":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, save)
while True:
    step += 1
    shepherd.log_metrics(step=step, loss=1.0 / step)
    print("step=%d loss=%.4f" % (step, 1.0 / step), flush=True)
    time.sleep(0.2)
`;

describe.skipIf(skipReason !== undefined)('local runs in a Podman container (real podman)', () => {
  const engineEnvironment = typeof setup === 'string' ? {} : setup.environment;
  let root: string;
  let runsDir: string;
  let workspace: string;
  const launched: RunMeta[] = [];

  function executorFor(options: { graceS?: number; runAs?: boolean } = {}): Executor {
    return createLocalExecutor({
      python: '/usr/bin/python3',
      runsDir,
      workspace,
      environment: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        ...engineEnvironment,
        SHEPHERD_TEST_MARKER: 'passed-by-name',
        IGNORE_SIGTERM: '0',
      },
      gpuInventory: [],
      graceS: options.graceS ?? 30,
      logger: silentLogger,
      container: { engine: 'podman', image: TEST_IMAGE },
      ...(options.runAs === true ? { runAs: lookupRunUser(RUN_USER) } : {}),
    });
  }

  /** A run directory with train.py, and its meta as the run service would pass it. */
  function newRun(id: string, overrides: Partial<RunMeta> = {}): { meta: RunMeta; runDir: string } {
    const runDir = path.join(runsDir, id);
    mkdirSync(runDir, { recursive: true });
    writeFileSync(path.join(runDir, 'train.py'), TRAIN);
    return { meta: testRunMeta(id, overrides), runDir };
  }

  async function launch(executor: Executor, meta: RunMeta, runDir: string): Promise<RunMeta> {
    const result = await executor.launch({ meta, runDir, gpuIndices: [] });
    const started = { ...meta, ...result } as RunMeta;
    launched.push(started);
    return started;
  }

  const output = (runDir: string) => readFileSync(path.join(runDir, 'output.log'), 'utf8');

  beforeAll(() => {
    root = mkdtempSync(path.join(tmpdir(), 'shepherd-ctr-'));
    runsDir = path.join(root, 'runs');
    workspace = path.join(root, 'workspace');
    mkdirSync(runsDir, { recursive: true });
    mkdirSync(workspace, { recursive: true });
    process.stderr.write(`local container tests: ${typeof setup === 'string' ? '' : setup.note}\n`);
  });

  afterAll(async () => {
    await endProcessGroups(launched.flatMap((meta) => (meta.pgid === undefined ? [] : [meta.pgid])));
    for (const meta of launched) removeContainer(`shepherd-${meta.id}`, engineEnvironment);
    removeTree(root);
  });

  it('runs train.py in the image with the helper, metrics in output.log; pause checkpoints once and resume continues', async () => {
    const executor = executorFor();
    const { meta, runDir } = newRun('r-0101-c0a1');
    const running = await launch(executor, meta, runDir);
    await waitFor(() => /step=3 loss/.test(output(runDir)), 60_000, 'printed metrics in output.log');
    const log = output(runDir);
    // Inside a container, with the variable passed by name, no GPUs, and the run dir at the same path.
    expect(log).toContain(
      `inside: container=True uid=0 home=/root cuda=[] marker=passed-by-name run_dir=${runDir}`,
    );
    expect(log).toMatch(
      /=== launch 1 at .* \(script v1, cpu, podman image localhost\/shepherd-test-python:stdlib\) ===/,
    );
    expect(readFileSync(path.join(runDir, 'metrics.jsonl'), 'utf8')).toMatch(/"step": 3, "loss": 0\.333/);
    expect(containersNamed('shepherd-r-0101-c0a1', engineEnvironment)).toEqual(['shepherd-r-0101-c0a1']);

    const paused = await executor.terminate(running, { graceMs: 30_000, reason: 'pause' });
    expect(paused).toEqual({ kind: 'signaled', signal: 'SIGTERM', exitCode: 0 });
    const afterPause = output(runDir);
    // Once: the engine client relays the signal; nothing else signals the container's processes.
    expect(afterPause.match(/SIGTERM handler \d+ at step \d+/g)).toHaveLength(1);
    const step = Number(/SIGTERM handler 1 at step (\d+)/.exec(afterPause)?.[1]);
    expect(step).toBeGreaterThanOrEqual(3);
    expect(JSON.parse(readFileSync(path.join(runDir, 'resume.json'), 'utf8'))).toMatchObject({
      step,
      checkpoint: `ckpt/step${step}.txt`,
    });
    expect(readFileSync(path.join(runDir, `ckpt/step${step}.txt`), 'utf8')).toBe('weights');
    expect(afterPause).toContain('=== launch 1 ended: exit code 0 (after SIGTERM) ===');
    expect(containersNamed('shepherd-r-0101-c0a1', engineEnvironment)).toEqual([]);

    const resumed = await launch(executor, { ...running, launchCount: 2 }, runDir);
    await waitFor(
      () => output(runDir).includes(`resumed from step ${step}`),
      60_000,
      'the relaunch to resume',
    );
    const stopped = await executor.terminate(resumed, { graceMs: 30_000, reason: 'stop' });
    expect(stopped).toMatchObject({ kind: 'signaled', signal: 'SIGTERM' });
  }, 180_000);

  it('at the time limit the launcher removes a container that ignores SIGTERM', async () => {
    const executor = executorFor({ graceS: 1 });
    const { meta, runDir } = newRun('r-0101-c0a2', { maxHours: 4 / 3600 });
    writeFileSync(
      path.join(runDir, 'train.py'),
      TRAIN.replace('os.environ.get("IGNORE_SIGTERM") == "1"', 'True'),
    );
    const running = await launch(executor, meta, runDir);
    const state = await waitFor(
      async () => {
        const found = (await executor.poll([running])).get(running.id);
        return found?.kind === 'alive' || found === undefined ? undefined : found;
      },
      60_000,
      'the time limit to end the run',
    );
    expect(state).toMatchObject({ kind: 'signaled', crashClass: 'timeout' } satisfies Partial<ProcessState>);
    expect(output(runDir)).toContain('[shepherd] the run ignored SIGTERM for 1.0 s; sending SIGKILL');
    expect(containersNamed('shepherd-r-0101-c0a2', engineEnvironment)).toEqual([]);
  }, 180_000);

  it('a stop past its grace removes the container and ends the launcher', async () => {
    const executor = executorFor();
    const { meta, runDir } = newRun('r-0101-c0a3');
    writeFileSync(
      path.join(runDir, 'train.py'),
      TRAIN.replace('os.environ.get("IGNORE_SIGTERM") == "1"', 'True'),
    );
    const running = await launch(executor, meta, runDir);
    await waitFor(() => /step=2 loss/.test(output(runDir)), 60_000, 'the run to train');
    const stopped = await executor.terminate(running, { graceMs: 1_500, reason: 'stop' });
    expect(stopped.kind).toBe('signaled');
    expect(containersNamed('shepherd-r-0101-c0a3', engineEnvironment)).toEqual([]);
    expect((await executor.poll([running])).get(running.id)?.kind).not.toBe('alive');
  }, 180_000);

  const runUser = ensureRunUser();

  it.skipIf(runUser !== undefined)(
    `with SHEPHERD_RUN_AS_USER the script runs as that user inside${runUser === undefined ? '' : ` (skipped: ${runUser})`}`,
    async () => {
      const executor = executorFor({ runAs: true });
      const { meta, runDir } = newRun('r-0101-c0a4');
      const user = lookupRunUser(RUN_USER);
      const running = await launch(executor, meta, runDir);
      await waitFor(() => /step=2 loss/.test(output(runDir)), 60_000, 'the run to train');
      expect(output(runDir)).toContain(`uid=${user.uid} home=${runDir}`);
      const paused = await executor.terminate(running, { graceMs: 30_000, reason: 'pause' });
      expect(paused).toEqual({ kind: 'signaled', signal: 'SIGTERM', exitCode: 0 });
      expect(readFileSync(path.join(runDir, 'resume.json'), 'utf8')).toContain('"checkpoint"');
    },
    180_000,
  );
});
