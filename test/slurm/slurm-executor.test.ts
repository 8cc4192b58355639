import { rm } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunError } from '../../src/errors.js';
import type { Executor, ProcessState } from '../../src/runs/executor.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { createSlurmExecutor } from '../../src/runs/slurm/slurm-executor.js';
import {
  countingRunCommand,
  makeDataRoot,
  makeRun,
  readText,
  SKIP_MESSAGE,
  silentLogger,
  slurmAvailable,
  slurmEnvironment,
  slurmTestConfig,
  waitFor,
} from './slurm-cluster.js';

/*
 * Against the REAL one-node Slurm cluster (2 fake GPUs). Tests run concurrently: the TIMEOUT case alone
 * needs Slurm's 1-minute minimum time limit plus its 30 s time-limit check.
 */

function newExecutor(overrides: Record<string, string> = {}): Executor {
  return createSlurmExecutor({
    config: slurmTestConfig(overrides),
    logger: silentLogger,
    environment: slurmEnvironment,
    terminatePollMs: 200,
  });
}

async function stateOf(executor: Executor, meta: RunMeta): Promise<ProcessState | undefined> {
  return (await executor.poll([meta])).get(meta.id);
}

async function waitForState(
  executor: Executor,
  meta: RunMeta,
  accept: (state: ProcessState) => boolean,
  what: string,
  timeoutMs = 30_000,
): Promise<ProcessState> {
  return waitFor(
    async () => {
      const state = await stateOf(executor, meta);
      return state !== undefined && accept(state) ? state : undefined;
    },
    { timeoutMs, intervalMs: 300, what },
  );
}

const isOver = (state: ProcessState) => state.kind !== 'alive' && state.kind !== 'pending';

describe.skipIf(!slurmAvailable)(
  `Slurm executor on a real cluster${slurmAvailable ? '' : ` (skipped: ${SKIP_MESSAGE})`}`,
  () => {
    let root: string;
    const submitted: string[] = [];

    beforeAll(async () => {
      root = await makeDataRoot();
    });

    afterAll(async () => {
      // Cancel anything a failed test left behind (only our own job ids).
      if (submitted.length > 0) {
        const { runCommand } = countingRunCommand();
        await runCommand('scancel', submitted);
      }
      await rm(root, { recursive: true, force: true });
    });

    async function launch(executor: Executor, meta: RunMeta, runDir: string): Promise<RunMeta> {
      const result = await executor.launch({ meta, runDir, gpuIndices: [] });
      expect(result.jobId).toMatch(/^\d+$/);
      if (result.jobId !== undefined) submitted.push(result.jobId);
      return { ...meta, ...result };
    }

    it.concurrent('reports a job over its --time as TIMEOUT', { timeout: 150_000 }, async () => {
      const executor = newExecutor();
      const { meta, runDir } = await makeRun(root, 'too-long', {
        maxHours: 1 / 60,
        config: { steps: 10_000, step_seconds: 1 },
      });
      const job = await launch(executor, meta, runDir);
      await waitForState(executor, job, (state) => state.kind === 'alive', 'the job to run');
      const final = await waitForState(executor, job, isOver, 'the time limit', 140_000);
      expect(final).toMatchObject({ kind: 'signaled', crashClass: 'timeout' });
    });

    it.concurrent('runs a job with GPUs, shows a waiting job its reason, and records metrics', async () => {
      const executor = newExecutor();
      const big = await makeRun(root, 'two-gpus', { gpus: 2, config: { steps: 15, step_seconds: 0.2 } });
      const bigJob = await launch(executor, big.meta, big.runDir);
      await waitForState(executor, bigJob, (state) => state.kind === 'alive', 'the 2-GPU job to run');

      // Both fake GPUs are taken: a 1-GPU job waits, and says why.
      // Submitted with `--gpus=N` and extra sbatch words, each passed as its own argument.
      const small = await makeRun(root, 'one-gpu', { gpus: 1, config: { steps: 2, step_seconds: 0.1 } });
      const smallExecutor = newExecutor({
        SHEPHERD_SLURM_EXTRA_ARGS: '--comment=shepherd-test  --no-requeue',
        SHEPHERD_SLURM_GPU_FLAG: 'gpus',
      });
      const smallJob = await launch(smallExecutor, small.meta, small.runDir);
      // Right after submission the reason is "None" until the scheduler has looked at the job.
      const waiting = await waitForState(
        executor,
        smallJob,
        (state) => state.kind === 'pending' && state.reason === 'queued on Slurm: waiting for resources',
        'the pending reason "Resources"',
        15_000,
      );
      expect(waiting).toEqual({ kind: 'pending', reason: 'queued on Slurm: waiting for resources' });
      const { runCommand } = countingRunCommand();
      const shown = (await runCommand('scontrol', ['show', 'job', '-o', smallJob.jobId ?? ''])).stdout;
      expect(shown).toContain('Comment=shepherd-test');
      expect(shown).toContain('Requeue=0');
      expect(shown).toMatch(/TresPerJob=(gres:)?gpu:1/);
      expect(shown).toContain('JobName=one-gpu');

      const metricsFile = path.join(big.runDir, 'metrics.jsonl');
      await waitFor(async () => ((await readText(metricsFile)).includes('"loss"') ? true : undefined), {
        timeoutMs: 20_000,
        what: 'metrics.jsonl',
      });
      const done = await waitForState(executor, bigJob, isOver, 'the 2-GPU job to finish');
      expect(done).toEqual({ kind: 'exited', exitCode: 0 });
      const metrics = (await readText(metricsFile)).trim().split('\n');
      expect(metrics).toHaveLength(15);
      const output = await readText(path.join(big.runDir, 'output.log'));
      expect(output).toMatch(/=== launch 1 at .* slurm job \d+ on .*gpus 2\) ===/);
      // Fake GPUs: Slurm counts them but sets no CUDA device list.
      expect(output).toContain('SLURM_GPUS_ON_NODE=2');

      const smallDone = await waitForState(executor, smallJob, isOver, 'the 1-GPU job to run and finish');
      expect(smallDone).toEqual({ kind: 'exited', exitCode: 0 });
      expect(await readText(path.join(small.runDir, 'output.log'))).toContain('SLURM_GPUS_ON_NODE=1');
    });

    it.concurrent('reports a crash with the exit code from Slurm, also after the job left squeue', async () => {
      const executor = newExecutor();
      const { meta, runDir } = await makeRun(root, 'crashes', { config: { steps: 5, exit_code: 3 } });
      const job = await launch(executor, meta, runDir);
      const crashed = await waitForState(executor, job, isOver, 'the crash');
      expect(crashed).toEqual({ kind: 'exited', exitCode: 3 });
      expect(await readText(path.join(runDir, 'output.log'))).toContain('RuntimeError: fixture crash');

      // After MinJobAge Slurm forgets the job; the final state then comes from sacct (jobcomp here).
      const { runCommand } = countingRunCommand();
      await waitFor(
        async () => {
          const result = await runCommand('squeue', ['-h', '-t', 'all', '-j', job.jobId ?? '', '-o', '%i']);
          return result.stdout.trim() === '' ? true : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 1000, what: 'the job to leave squeue' },
      );
      expect(await stateOf(newExecutor(), job)).toEqual({ kind: 'exited', exitCode: 3 });
    });

    it.concurrent('pauses with a checkpoint, resumes from it after a restart, and stops', async () => {
      const executor = newExecutor();
      const { meta, runDir } = await makeRun(root, 'pausable', {
        config: { steps: 10_000, step_seconds: 0.2 },
      });
      const job = await launch(executor, meta, runDir);
      const metricsFile = path.join(runDir, 'metrics.jsonl');
      await waitFor(async () => ((await readText(metricsFile)).split('\n').length > 4 ? true : undefined), {
        timeoutMs: 30_000,
        what: 'a few steps',
      });

      const paused = await executor.terminate(job, { graceMs: 20_000, reason: 'pause' });
      expect(paused).toMatchObject({ kind: 'signaled', signal: 'SIGTERM', exitCode: 0 });
      const resume = JSON.parse(await readText(path.join(runDir, 'resume.json'))) as { step: number };
      expect(resume.step).toBeGreaterThanOrEqual(3);
      expect(await readText(path.join(runDir, 'output.log'))).toContain('received SIGTERM');

      // "Bot restart": a new executor resubmits and later finds the job by its stored id.
      const restarted = newExecutor();
      const second = await launch(restarted, { ...job, launchCount: 2 }, runDir);
      expect(second.jobId).not.toBe(job.jobId);
      await waitFor(
        async () =>
          (await readText(path.join(runDir, 'output.log'))).includes(`starting at step ${resume.step + 1}`)
            ? true
            : undefined,
        { timeoutMs: 30_000, what: 'the resumed launch' },
      );
      const reattached = newExecutor();
      expect(await stateOf(reattached, second)).toEqual({ kind: 'alive' });

      const stopped = await reattached.terminate(second, { graceMs: 20_000, reason: 'stop' });
      expect(stopped).toMatchObject({ kind: 'signaled', signal: 'SIGTERM' });
      const output = await readText(path.join(runDir, 'output.log'));
      expect(output.match(/=== launch \d+ at/g)).toHaveLength(2);
      expect(output).toContain('=== launch 2 at');
      const steps = (await readText(metricsFile))
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { step: number }).step);
      // The second launch continued after the checkpoint: no step was logged twice.
      expect(new Set(steps).size).toBe(steps.length);
      expect(await stateOf(reattached, second)).toMatchObject({ kind: 'exited', exitCode: 0 });
    });

    it.concurrent('forces a job that ignores SIGTERM off the cluster after the grace period', async () => {
      const executor = newExecutor();
      const { meta, runDir } = await makeRun(root, 'stubborn', {
        config: { steps: 10_000, step_seconds: 0.2 },
      });
      // Replace the fixture with one that ignores SIGTERM.
      const { writeFile } = await import('node:fs/promises');
      await writeFile(
        path.join(runDir, 'train.py'),
        'import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint("ignoring TERM", flush=True)\ntime.sleep(600)\n',
      );
      const job = await launch(executor, meta, runDir);
      await waitFor(
        async () =>
          (await readText(path.join(runDir, 'output.log'))).includes('ignoring TERM') ? true : undefined,
        {
          timeoutMs: 30_000,
          what: 'the stubborn job to start',
        },
      );
      const started = Date.now();
      const result = await executor.terminate(job, { graceMs: 1500, reason: 'stop' });
      expect(result).toEqual({ kind: 'signaled', signal: 'SIGKILL', exitCode: 137 });
      expect(Date.now() - started).toBeGreaterThanOrEqual(1500);
      expect(await stateOf(executor, job)).toMatchObject({ kind: 'signaled', crashClass: 'cancelled' });
    });

    it.concurrent('refuses an impossible GPU request and a bad partition with Slurm’s reason', async () => {
      const tooMany = await makeRun(root, 'three-gpus', { gpus: 3 });
      const error = await newExecutor()
        .launch({ meta: tooMany.meta, runDir: tooMany.runDir, gpuIndices: [] })
        .catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(RunError);
      expect((error as RunError).code).toBe('slurm_submit_failed');
      expect((error as RunError).message).toContain('Requested node configuration is not available');
      expect((error as RunError).message.length).toBeLessThanOrEqual(320);

      const elsewhere = await makeRun(root, 'bad-partition');
      const partitionError = await newExecutor({ SHEPHERD_SLURM_PARTITION: 'no-such-partition' })
        .launch({ meta: elsewhere.meta, runDir: elsewhere.runDir, gpuIndices: [] })
        .catch((caught: unknown) => caught);
      expect((partitionError as RunError).code).toBe('slurm_submit_failed');
      expect((partitionError as RunError).message).toContain('Invalid partition name specified');
    });

    it.concurrent('describes the cluster: nodes, GPUs and the queue', async () => {
      const info = await newExecutor().clusterInfo();
      expect(info.executor).toBe('slurm');
      expect(info.gpusTotal).toBe(2);
      expect(info.gpusFree).toBeGreaterThanOrEqual(0);
      expect(info.gpusFree).toBeLessThanOrEqual(2);
      expect(info.nodes?.[0]).toMatchObject({ name: 'localhost', gpusTotal: 2 });
      expect(typeof info.queueLength).toBe('number');
    });
  },
);
