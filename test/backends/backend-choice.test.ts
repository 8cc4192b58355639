import { describe, expect, it } from 'vitest';
import { parsePlainCommand } from '../../src/commands/parse-command.js';
import { loadConfig } from '../../src/config/config.js';
import { createBackendRouter } from '../../src/runs/backend-router.js';
import type { Executor, ProcessState } from '../../src/runs/executor.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { parseSweepTokens } from '../../src/sweeps/sweep-grid.js';
import { testRunMeta } from '../helpers/run-meta.js';

/** An executor that records which runs it was asked about (the router's routing is what is tested). */
function recordingExecutor(kind: Executor['kind'], allocatesGpus: boolean) {
  const polled: string[][] = [];
  const executor: Executor = {
    kind,
    allocatesGpus,
    launch: async () => ({ jobId: `${kind}-1` }),
    poll: async (runs: RunMeta[]) => {
      polled.push(runs.map((meta) => meta.id));
      return new Map<string, ProcessState>(runs.map((meta) => [meta.id, { kind: 'alive' }]));
    },
    terminate: async () => ({ kind: 'signaled', signal: 'SIGTERM' }),
    clusterInfo: async () => ({ executor: kind, gpusTotal: 8, gpusFree: 8 }),
  };
  return { executor, polled };
}

describe('choosing a backend', () => {
  it('parses SHEPHERD_BACKENDS with aliases, the default first, and refuses an unknown one by name', () => {
    const config = loadConfig({ SHEPHERD_EXECUTOR: 'slurm', SHEPHERD_BACKENDS: 'local, k8s,hf,slurm' });
    expect(config.runs.backends).toEqual(['slurm', 'local', 'kubernetes', 'hfjobs']);
    expect(loadConfig({}).runs.backends).toEqual(['local']);
    expect(() => loadConfig({ SHEPHERD_BACKENDS: 'local,aws' })).toThrow(
      /SHEPHERD_BACKENDS.*unknown backend "aws"/s,
    );
    expect(() => loadConfig({ SHEPHERD_EXECUTOR: 'nomad' })).toThrow(/SHEPHERD_EXECUTOR/);
  });

  it('reads --on, --image and --flavor on run, sweep and resume, and k8s:/hf: watch targets', () => {
    expect(
      parsePlainCommand(
        'run --gpus 8 --on k8s --image ghcr.io/acme/train:1 --name mistral-sft -- torchrun sft.py',
      ),
    ).toEqual({
      name: 'run',
      command: ['torchrun', 'sft.py'],
      gpus: 8,
      on: 'k8s',
      image: 'ghcr.io/acme/train:1',
      runName: 'mistral-sft',
    });
    expect(parsePlainCommand('run train.py --on hf --flavor a100-large')).toEqual({
      name: 'run',
      path: 'train.py',
      on: 'hf',
      flavor: 'a100-large',
    });
    expect(parsePlainCommand('run train.py --on "k8s; rm"')).toMatchObject({ name: 'invalid' });
    expect(parsePlainCommand('resume qwen --on k8s')).toEqual({ name: 'resume', run: 'qwen', on: 'k8s' });
    expect(parsePlainCommand('resume qwen')).toEqual({ name: 'resume', run: 'qwen' });
    expect(parsePlainCommand('watch k8s:ml-team/mistral-sft')).toEqual({
      name: 'watch',
      target: { kind: 'kubernetes', namespace: 'ml-team', job: 'mistral-sft' },
    });
    expect(parsePlainCommand('watch k8s:mistral-sft --name m')).toEqual({
      name: 'watch',
      target: { kind: 'kubernetes', job: 'mistral-sft' },
      runName: 'm',
    });
    expect(parsePlainCommand('watch hf:6853a5bb0c1d2e3f4a5b6c7d')).toEqual({
      name: 'watch',
      target: { kind: 'hfjobs', jobId: '6853a5bb0c1d2e3f4a5b6c7d' },
    });
    expect(parsePlainCommand('watch k8s:Bad_Name')).toMatchObject({ name: 'invalid', command: 'watch' });
    const sweep = parseSweepTokens(['train.py', '--grid', 'lr=1,2', '--on', 'hf', '--flavor', 'a10g-small']);
    expect(sweep).toMatchObject({ ok: true, spec: { on: 'hf', flavor: 'a10g-small' } });
  });

  it('routes each run to its own backend and refuses an unconfigured one naming the configured ones', async () => {
    const local = recordingExecutor('local', false);
    const kubernetes = recordingExecutor('kubernetes', true);
    const warnings: string[] = [];
    const router = createBackendRouter({
      backends: new Map([
        ['local', local.executor],
        ['kubernetes', kubernetes.executor],
      ]),
      defaultKind: 'local',
      gpuHourUsd: (kind) => (kind === 'kubernetes' ? 3 : 2),
      logger: { warn: (...args: unknown[]) => void warnings.push(String(args[1])) },
    });
    expect(router.resolve(undefined)).toBe('local');
    expect(router.resolve('K8S')).toBe('kubernetes');
    expect(() => router.resolve('hf')).toThrow(
      'the hf backend is not configured here; configured: local, k8s',
    );
    expect(() => router.resolve('aws')).toThrow('unknown backend "aws"; configured: local, k8s');
    const a = testRunMeta('r-a', { executor: 'local' });
    const b = testRunMeta('r-b', { executor: 'kubernetes' });
    const c = testRunMeta('r-c', { executor: 'kubernetes' });
    const lost = testRunMeta('r-d', { executor: 'hfjobs' });
    const states = await router.poll([a, b, c, lost]);
    // One batched poll per backend; a run whose backend is gone gets no state (so it is not failed), and a log line.
    expect(local.polled).toEqual([['r-a']]);
    expect(kubernetes.polled).toEqual([['r-b', 'r-c']]);
    expect(states.get('r-b')).toEqual({ kind: 'alive' });
    expect(states.has('r-d')).toBe(false);
    expect(warnings).toEqual(['cannot poll a run: its backend is not configured']);
    // A backend whose poll throws leaves its runs without a state too; the others are still answered.
    kubernetes.executor.poll = async () => {
      throw new Error('connection refused');
    };
    const partial = await router.poll([a, b]);
    expect(partial.get('r-a')).toEqual({ kind: 'alive' });
    expect(partial.has('r-b')).toBe(false);
    expect(await router.launch({ meta: b, runDir: '/tmp/x', gpuIndices: [] })).toEqual({
      jobId: 'kubernetes-1',
    });
    expect(router.executorFor(b).allocatesGpus).toBe(true);
    expect(router.executorFor(a).allocatesGpus).toBe(false);
    // A backend without its own price is GPUs × its GPU-hour price.
    expect(await router.placeOn('kubernetes', { gpus: 4, maxHours: 2 })).toEqual({
      description: 'Kubernetes',
      hourlyUsd: 12,
    });
    const infos = await router.clusterInfoAll();
    expect(infos.map((info) => info.executor)).toEqual(['local', 'kubernetes']);
  });
});
