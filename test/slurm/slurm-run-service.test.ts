import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRunsRuntime, type RunsRuntime } from '../../src/app/create-runs.js';
import type { RunEvent } from '../../src/runs/lifecycle/run-events.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { createSlurmExecutor } from '../../src/runs/slurm/slurm-executor.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import {
  countingRunCommand,
  FIXTURE,
  makeDataRoot,
  readText,
  SKIP_MESSAGE,
  silentLogger,
  slurmAvailable,
  slurmEnvironment,
  slurmTestConfig,
  waitFor,
} from './slurm-cluster.js';

/* The run service (status machine, audit, events) driving the real Slurm cluster through the executor seam. */

const ALICE = { id: 'U-alice', name: 'alice' };
const BOB = { id: 'U-bob', name: 'bob' };
const thread = 'web:local:slurm';

describe.skipIf(!slurmAvailable)(
  `run service on Slurm${slurmAvailable ? '' : ` (skipped: ${SKIP_MESSAGE})`}`,
  () => {
    let dataDir: string;
    let prefix: string;
    const connections: Redis[] = [];
    let config: ReturnType<typeof slurmTestConfig>;

    async function build(): Promise<{ runtime: RunsRuntime; events: RunEvent[] }> {
      const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
      connections.push(redis);
      const events: RunEvent[] = [];
      const runtime = await createRunsRuntime({
        config,
        redis,
        logger: silentLogger,
        environment: slurmEnvironment,
        executor: createSlurmExecutor({
          config,
          logger: silentLogger,
          environment: slurmEnvironment,
          terminatePollMs: 200,
        }),
        onEvent: (event) => {
          events.push(event);
        },
      });
      return { runtime, events };
    }

    let first: { runtime: RunsRuntime; events: RunEvent[] };

    beforeAll(async () => {
      dataDir = await makeDataRoot();
      prefix = uniquePrefix('slurm');
      config = slurmTestConfig({
        SHEPHERD_DATA_DIR: dataDir,
        SHEPHERD_QUEUE_PREFIX: prefix,
        SHEPHERD_STOP_GRACE_S: '20',
        SHEPHERD_GPUS: '0',
      });
      first = await build();
    });

    afterAll(async () => {
      const jobIds = (await first.runtime.store.listRuns())
        .filter((meta) => meta.status === 'running' && meta.jobId !== undefined)
        .map((meta) => meta.jobId ?? '');
      if (jobIds.length > 0) await countingRunCommand().runCommand('scancel', jobIds);
      for (const connection of connections) connection.disconnect();
      await deleteKeysWithPrefix(prefix);
      await rm(dataDir, { recursive: true, force: true });
    });

    async function refreshUntil(
      runtime: RunsRuntime,
      name: string,
      accept: (meta: RunMeta) => boolean,
      what: string,
    ): Promise<RunMeta> {
      return waitFor(
        async () => {
          await runtime.service.refresh();
          const meta = await runtime.find(name);
          return accept(meta) ? meta : undefined;
        },
        { timeoutMs: 40_000, intervalMs: 300, what },
      );
    }

    const runFile = (meta: RunMeta, file: string) =>
      readText(path.join(first.runtime.store.runDir(meta.id), file));

    it.concurrent('approve → Slurm job → metrics → pause → restart → resume from the checkpoint → stop', async () => {
      const { service } = first.runtime;
      const script = await readFile(FIXTURE, 'utf8');
      const created = await service.createRun({
        name: 'slurm-healthy',
        script,
        // No GPUs here: the executor test owns the cluster's two GPUs, so its pending-reason check stays exact.
        gpus: 0,
        threadId: thread,
        requester: ALICE,
        config: { steps: 10_000, step_seconds: 0.2 },
      });
      expect(created.executor).toBe('slurm');
      const running = await service.approve(created.id, BOB);
      expect(running.status).toBe('running');
      expect(running.jobId).toMatch(/^\d+$/);
      expect(
        first.events.some((event) => event.type === 'run-started' && event.message.includes('on Slurm')),
      ).toBe(true);

      await waitFor(
        async () => ((await runFile(running, 'metrics.jsonl')).split('\n').length > 4 ? true : undefined),
        {
          timeoutMs: 30_000,
          what: 'metrics from the Slurm job',
        },
      );
      const report = await first.runtime.status('slurm-healthy');
      expect(report.process).toEqual({ kind: 'alive' });
      expect(report.lastMetrics.length).toBeGreaterThan(0);
      expect(await runFile(running, 'output.log')).toMatch(/=== launch 1 at .* slurm job \d+ on /);

      const paused = await service.pause('slurm-healthy', ALICE);
      expect(paused.status).toBe('paused');
      const resume = JSON.parse(await runFile(running, 'resume.json')) as { step: number };
      expect(resume.step).toBeGreaterThanOrEqual(3);

      // Bot restart while paused; the new instance resumes, which resubmits the job.
      const second = await build();
      const resumed = await second.runtime.service.resume('slurm-healthy', BOB);
      expect(resumed.status).toBe('running');
      expect(resumed.launchCount).toBe(2);
      expect(resumed.jobId).not.toBe(running.jobId);
      await waitFor(
        async () =>
          (await runFile(running, 'output.log')).includes(`starting at step ${resume.step + 1}`)
            ? true
            : undefined,
        { timeoutMs: 30_000, what: 'the resumed job' },
      );

      // A third instance (another restart) re-attaches to the running job by its id.
      const third = await build();
      const reconciled = await third.runtime.service.reconcile();
      expect(reconciled.reattached.map((meta) => meta.id)).toContain(created.id);

      const stopped = await third.runtime.service.stop('slurm-healthy', ALICE);
      expect(stopped.status).toBe('stopped');
      const audit = await runFile(running, 'audit.jsonl');
      expect(audit).toContain('"to":"paused"');
      expect(audit).toContain('"to":"stopped"');
    });

    it.concurrent('marks a crashed job failed with the exit code from Slurm', async () => {
      const { service } = first.runtime;
      const created = await service.createRun({
        name: 'slurm-crash',
        script: await readFile(FIXTURE, 'utf8'),
        gpus: 0,
        threadId: thread,
        requester: ALICE,
        config: { steps: 5, exit_code: 3 },
      });
      await service.approve(created.id, BOB);
      const failed = await refreshUntil(
        first.runtime,
        'slurm-crash',
        (meta) => meta.status === 'failed',
        'failure',
      );
      expect(failed.exitCode).toBe(3);
      expect(failed.statusReason).toContain('exit 3');
    });

    it.concurrent('fails a run Slurm refuses, with Slurm’s reason, instead of leaving it queued', async () => {
      const { service } = first.runtime;
      const created = await service.createRun({
        name: 'slurm-too-big',
        script: await readFile(FIXTURE, 'utf8'),
        gpus: 3,
        threadId: thread,
        requester: ALICE,
      });
      const result = await service.approve(created.id, BOB);
      expect(result.status).toBe('failed');
      expect(result.statusReason).toContain('Requested node configuration is not available');
      expect(
        first.events.some(
          (event) => event.type === 'run-ended' && event.message.includes('Requested node configuration'),
        ),
      ).toBe(true);
    });

    it.concurrent('reports Slurm nodes and GPUs as cluster info', async () => {
      const info = await first.runtime.clusterInfo();
      expect(info.executor).toBe('slurm');
      expect(info.gpusTotal).toBe(2);
      expect(info.nodes?.map((node) => node.name)).toEqual(['localhost']);
    });
  },
);
