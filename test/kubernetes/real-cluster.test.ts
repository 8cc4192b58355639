import { rm } from 'node:fs/promises';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createKubernetesExecutor,
  type KubernetesExecutor,
} from '../../src/runs/kubernetes/kubernetes-executor.js';
import { PYTHON_RUNTIME_DIR } from '../../src/runs/records/run-files.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import {
  makeRun,
  makeRunsDir,
  readLog,
  silentLogger,
  testSettings,
  waitFor,
  waitForState,
} from './kubernetes-harness.js';

/*
 * Opt-in, against a REAL cluster: SHEPHERD_K8S_E2E=1 with KUBECONFIG pointing at it. Runs on the CPU (no
 * GPU asked for) in SHEPHERD_K8S_NAMESPACE (default `default`) with SHEPHERD_K8S_IMAGE (default
 * python:3.12-slim), and needs the verbs of deploy/kubernetes/rbac.yaml there. Without the flag it is
 * skipped, and says so.
 */

const kubeconfig = process.env.KUBECONFIG?.split(':').find((entry) => entry !== '');
const enabled = process.env.SHEPHERD_K8S_E2E === '1' && kubeconfig !== undefined;
const SKIP_MESSAGE = 'set SHEPHERD_K8S_E2E=1 and KUBECONFIG to run it against a real cluster';
if (!enabled) process.stderr.write(`real-cluster.test.ts skipped: ${SKIP_MESSAGE}\n`);

const ended = (state: { kind: string }) => state.kind === 'exited' || state.kind === 'signaled';

describe.skipIf(!enabled)(
  `Kubernetes executor on a real cluster${enabled ? '' : ` (skipped: ${SKIP_MESSAGE})`}`,
  () => {
    let runsDir: string;
    let executor: KubernetesExecutor;

    beforeAll(async () => {
      runsDir = await makeRunsDir();
      const kubeConfig = new KubeConfig();
      kubeConfig.loadFromFile(kubeconfig ?? '');
      executor = createKubernetesExecutor({
        settings: testSettings({
          namespace: process.env.SHEPHERD_K8S_NAMESPACE ?? 'default',
          image: process.env.SHEPHERD_K8S_IMAGE ?? 'python:3.12-slim',
        }),
        graceS: 20,
        runDir: (runId) => path.join(runsDir, runId),
        helperDir: PYTHON_RUNTIME_DIR,
        logger: silentLogger,
        kubeConfig,
        timing: { checkMs: 500, marginMs: 120_000 },
      });
    });

    afterAll(async () => {
      await executor?.close();
      if (runsDir !== undefined) await rm(runsDir, { recursive: true, force: true });
    });

    async function launch(meta: RunMeta): Promise<RunMeta> {
      const { jobId } = await executor.launch({ meta, runDir: path.join(runsDir, meta.id), gpuIndices: [] });
      return { ...meta, ...(jobId === undefined ? {} : { jobId }) };
    }

    it('runs a script to its end and streams its log, NaN included', async () => {
      const meta = await launch(
        await makeRun(runsDir, { args: ['--steps', '20', '--sleep', '0.2', '--nan-at', '7'] }),
      );
      expect(await waitForState(executor, meta, ended, 'the Job to end', 600_000)).toEqual({
        kind: 'exited',
        exitCode: 0,
      });
      const log = await readLog(runsDir, meta.id);
      expect([...log.matchAll(/^step=(\d+) /gm)].map((match) => Number(match[1]))).toEqual(
        Array.from({ length: 20 }, (_, index) => index + 1),
      );
      expect(log).toContain('step=7 loss=nan');
    }, 660_000);

    it('pauses (suspend: the script checkpoints), resumes, and stops (Foreground delete)', async () => {
      let meta = await launch(await makeRun(runsDir, { args: ['--steps', '100000', '--sleep', '0.2'] }));
      await waitFor(
        async () => {
          await executor.poll([meta]);
          return (await readLog(runsDir, meta.id)).includes('step=3 ');
        },
        'three steps',
        600_000,
      );
      expect(await executor.terminate(meta, { graceMs: 20_000, reason: 'pause' })).toMatchObject({
        kind: 'signaled',
      });
      expect(await readLog(runsDir, meta.id)).toContain('SIGTERM handled: checkpoint at step');
      meta = await launch({ ...meta, launchCount: 2 });
      await waitFor(
        async () => {
          await executor.poll([meta]);
          return (await readLog(runsDir, meta.id)).includes('(launch 2, rank -)');
        },
        'the resumed pod',
        600_000,
      );
      expect(await executor.terminate(meta, { graceMs: 20_000, reason: 'stop' })).toMatchObject({
        kind: 'signaled',
      });
      expect((await executor.poll([meta])).get(meta.id)?.kind).toBe('unknown');
    }, 1_500_000);

    it('reports the cluster', async () => {
      const info = await executor.clusterInfo();
      expect(info.executor).toBe('kubernetes');
      expect(info.notes?.length).toBeGreaterThan(0);
    });
  },
);
