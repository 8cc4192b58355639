import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunError } from '../../src/errors.js';
import type { ProcessState } from '../../src/runs/executor.js';
import type { KubernetesExecutor } from '../../src/runs/kubernetes/kubernetes-executor.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { createStdoutParser, createStdoutParseState } from '../../src/runs/stdout-metrics/stdout-parser.js';
import { type KubernetesEmulator, startKubernetesEmulator } from '../emulators/kubernetes-api-server.js';
import type { WireConfigMap, WireService } from '../emulators/kubernetes-objects.js';
import {
  grantedCalls,
  makeRun,
  makeRunsDir,
  newExecutor,
  rbacAuthorizer,
  readLog,
  readMetrics,
  stateOf,
  testSettings,
  waitFor,
  waitForState,
} from './kubernetes-harness.js';

/*
 * The Kubernetes executor against the API emulator, which enforces deploy/kubernetes/rbac.yaml (any other
 * call is 403) and runs each pod's container as a real Python process. Tests share one emulator so the
 * last one can check that the Role grants exactly the calls made here.
 */

const PVC = 'shepherd-runs';
let emulator: KubernetesEmulator;
let runsDir: string;
let executor: KubernetesExecutor;

beforeAll(async () => {
  runsDir = await makeRunsDir();
  // The PVC stands for a volume the bot shares: its `<run id>` folder is the run directory.
  emulator = await startKubernetesEmulator({
    authorize: await rbacAuthorizer(),
    volumes: { [PVC]: runsDir },
    namespaces: ['default', 'ml', 'research'],
  });
  executor = newExecutor(emulator, runsDir);
});

afterAll(async () => {
  await executor?.close();
  await emulator?.close();
  await rm(runsDir, { recursive: true, force: true });
});

async function launch(target: KubernetesExecutor, meta: RunMeta): Promise<RunMeta> {
  const result = await target.launch({ meta, runDir: path.join(runsDir, meta.id), gpuIndices: [] });
  expect(result.jobId).toBeDefined();
  return { ...meta, jobId: result.jobId ?? '' };
}

/** How many of the run's Jobs and ConfigMaps the emulated cluster holds. */
function ownedBy(runId: string) {
  const mine = (labels: Record<string, string> | undefined) => labels?.['shepherd.dev/run'] === runId;
  return {
    jobs: emulator.jobs('ml').filter((job) => mine(job.metadata.labels)).length,
    configmaps: emulator.objects('configmaps', 'ml').filter((entry) => mine(entry.metadata.labels)).length,
  };
}

const ended = (state: ProcessState) => state.kind === 'exited' || state.kind === 'signaled';

/** `step=N` lines of output.log, in order. */
function stepLines(log: string): number[] {
  return [...log.matchAll(/^step=(\d+) /gm)].map((match) => Number(match[1]));
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, index) => from + index);
}

describe('launch', () => {
  it('creates a Job with the GPUs, deadline, labels and restart policy, and a ConfigMap with the script it owns', async () => {
    const meta = await launch(
      executor,
      await makeRun(runsDir, { gpus: 2, maxHours: 1.5, args: ['--steps', '3'] }),
    );
    const job = emulator.jobs('ml').find((entry) => entry.metadata.name === meta.jobId);
    expect(job?.metadata.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'shepherd',
      'shepherd.dev/run': meta.id,
    });
    expect(job?.spec.backoffLimit).toBe(0);
    expect(job?.spec.activeDeadlineSeconds).toBe(5400);
    expect(job?.spec.template.spec.restartPolicy).toBe('Never');
    expect(job?.spec.template.spec.terminationGracePeriodSeconds).toBe(5);
    const container = job?.spec.template.spec.containers[0];
    expect(container?.image).toBe('registry.example.com/train:1');
    expect(container?.resources?.limits).toEqual({ 'nvidia.com/gpu': '2' });
    expect(container?.command).toEqual(['python', '-u', '/shepherd/files/train.py', '--steps', '3']);
    const configMap = emulator
      .objects('configmaps', 'ml')
      .find((entry) => entry.metadata.name === `${meta.jobId}-files`) as WireConfigMap | undefined;
    expect(configMap?.data?.script).toBe(await readFile(path.join(runsDir, meta.id, 'train.py'), 'utf8'));
    expect(configMap?.data?.['helper.shepherd.py']).toContain('def log_metrics');
    expect(configMap?.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'Job', uid: job?.metadata.uid });
    expect(await waitForState(executor, meta, ended, 'the run to end')).toEqual({
      kind: 'exited',
      exitCode: 0,
    });
  });

  it("streams the pod's printed lines into output.log and the helper's metrics into metrics.jsonl, NaN included", async () => {
    const meta = await launch(executor, await makeRun(runsDir, { args: ['--steps', '6', '--nan-at', '4'] }));
    await waitForState(executor, meta, ended, 'the run to end');
    const log = await readLog(runsDir, meta.id);
    expect(log).toMatch(
      /^=== launch 1 at .* \(script v1, kubernetes job ml\/train-\d+-[0-9a-f-]+-1, 0 GPUs\) ===$/m,
    );
    expect(stepLines(log)).toEqual(range(1, 6));
    expect(log).toContain('step=4 loss=nan\n');
    expect(log).toContain('training done\n');
    // The printed line is read as the monitor reads output.log: a NaN loss at step 4.
    const { points } = createStdoutParser().parseLines(log.split('\n'), createStdoutParseState());
    expect(points.find((point) => point.step === 4)?.metrics.loss).toBeNaN();
    // No shared volume: the helper's printed metrics became the run's metrics.jsonl, not log lines.
    expect(log).not.toContain('[metrics]');
    const metrics = await readMetrics(runsDir, meta.id);
    expect(metrics.map((point) => point.step)).toEqual(range(1, 6));
    expect(metrics[3]?.metrics.loss).toBeNaN();
    expect(metrics[0]?.metrics.loss).toBe(1);
  });

  it('refuses a run without an image, before any call', async () => {
    const bare = newExecutor(emulator, runsDir, testSettings({ image: undefined }));
    const before = emulator.calls.length;
    const meta = await makeRun(runsDir);
    await expect(bare.launch({ meta, runDir: path.join(runsDir, meta.id), gpuIndices: [] })).rejects.toThrow(
      'no container image: set SHEPHERD_K8S_IMAGE or pass --image',
    );
    await expect(bare.placement?.({ gpus: 1, maxHours: 1 })).rejects.toMatchObject({ code: 'invalid_run' });
    expect(emulator.calls.length).toBe(before);
    await bare.close();
  });

  it('a label over 63 characters is refused by the API server as an invalid run, and nothing is left', async () => {
    const strict = newExecutor(emulator, runsDir, testSettings({ queue: 'q'.repeat(64) }));
    const meta = await makeRun(runsDir);
    const error = await strict
      .launch({ meta, runDir: path.join(runsDir, meta.id), gpuIndices: [] })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(RunError);
    expect((error as RunError).code).toBe('invalid_run');
    expect((error as RunError).message).toContain('must be no more than 63 characters');
    expect(ownedBy(meta.id)).toEqual({ jobs: 0, configmaps: 0 });
    await strict.close();
  });

  it('when the Job is refused after its ConfigMap was made (an admission policy), the ConfigMap is deleted', async () => {
    emulator.setAdmission((resource, object) =>
      resource === 'jobs' && JSON.stringify(object).includes('"nvidia.com/gpu":"9"')
        ? 'more than 8 GPUs need a reservation'
        : undefined,
    );
    const meta = await makeRun(runsDir, { gpus: 9 });
    const error = await executor
      .launch({ meta, runDir: path.join(runsDir, meta.id), gpuIndices: [] })
      .catch((caught: unknown) => caught);
    emulator.setAdmission(() => undefined);
    expect((error as RunError).code).toBe('backend_api_failed');
    expect((error as RunError).message).toContain('denied the request: more than 8 GPUs need a reservation');
    expect(ownedBy(meta.id)).toEqual({ jobs: 0, configmaps: 0 });
    const deletes = emulator.calls.filter((call) => call.verb === 'delete' && call.resource === 'configmaps');
    expect(deletes).toHaveLength(1);
  });
});

describe('logs across reconnects and restarts', () => {
  it('reconnects when the log stream breaks and writes every line exactly once', async () => {
    const meta = await launch(
      executor,
      await makeRun(runsDir, { args: ['--steps', '60', '--sleep', '0.03'] }),
    );
    const linesAtLeast = (count: number) => async () => {
      await stateOf(executor, meta);
      return stepLines(await readLog(runsDir, meta.id)).length >= count;
    };
    await waitFor(linesAtLeast(10), 'ten lines');
    expect(emulator.dropLogStreams()).toBeGreaterThan(0);
    await waitFor(linesAtLeast(30), 'thirty lines');
    expect(emulator.dropLogStreams()).toBeGreaterThan(0);
    await waitForState(executor, meta, ended, 'the run to end');
    const log = await readLog(runsDir, meta.id);
    expect(stepLines(log)).toEqual(range(1, 60));
    expect((await readMetrics(runsDir, meta.id)).map((point) => point.step)).toEqual(range(1, 60));
    const logReads = emulator.calls.filter(
      (call) => call.resource === 'pods/log' && call.query.sinceTime !== undefined,
    );
    expect(logReads.length).toBeGreaterThan(0);
  });

  it('a new executor on the same run directory picks up where the old one stopped, without duplicates', async () => {
    const first = newExecutor(emulator, runsDir);
    const meta = await launch(first, await makeRun(runsDir, { args: ['--steps', '50', '--sleep', '0.03'] }));
    await waitFor(async () => {
      await stateOf(first, meta);
      return stepLines(await readLog(runsDir, meta.id)).length >= 15;
    }, 'fifteen lines');
    await first.close();
    const second = newExecutor(emulator, runsDir);
    await waitForState(second, meta, ended, 'the run to end');
    const log = await readLog(runsDir, meta.id);
    expect(stepLines(log)).toEqual(range(1, 50));
    expect(log.match(/^=== launch 1 /gm)).toHaveLength(1);
    await second.close();
  });
});

describe('pause, resume and stop', () => {
  it('pause suspends the Job (the script checkpoints on SIGTERM) and resume unsuspends it from the checkpoint', async () => {
    const pvcExecutor = newExecutor(emulator, runsDir, testSettings({ pvc: PVC }));
    let meta = await launch(
      pvcExecutor,
      await makeRun(runsDir, { args: ['--steps', '100000', '--sleep', '0.05'] }),
    );
    await waitFor(async () => {
      await stateOf(pvcExecutor, meta);
      return stepLines(await readLog(runsDir, meta.id)).length >= 5;
    }, 'five steps');
    const paused = await pvcExecutor.terminate(meta, { graceMs: 5_000, reason: 'pause' });
    // A pause, not an ending: the run-service records it as paused (an `exited` state would finish it).
    expect(paused).toMatchObject({ kind: 'signaled', signal: 'SIGTERM' });
    const job = emulator.jobs('ml').find((entry) => entry.metadata.name === meta.jobId);
    expect(job?.spec.suspend).toBe(true);
    expect(job?.status?.conditions?.some((condition) => condition.type === 'Failed')).toBe(false);
    expect(emulator.pods('ml').filter((pod) => pod.metadata.labels?.['job-name'] === meta.jobId)).toEqual([]);
    const log = await readLog(runsDir, meta.id);
    const checkpoint = /SIGTERM handled: checkpoint at step (\d+)/.exec(log);
    expect(checkpoint).not.toBeNull();
    const step = Number(checkpoint?.[1]);
    const resume = JSON.parse(await readFile(path.join(runsDir, meta.id, 'resume.json'), 'utf8')) as {
      step: number;
    };
    expect(resume.step).toBe(step);

    meta = await launch(pvcExecutor, { ...meta, launchCount: 2 });
    expect(meta.jobId).toBe(job?.metadata.name);
    const resumed = emulator.jobs('ml').find((entry) => entry.metadata.name === meta.jobId);
    expect(resumed?.spec.suspend).toBe(false);
    expect(resumed?.metadata.annotations?.['shepherd.dev/launch']).toBe('2');
    await waitFor(async () => {
      await stateOf(pvcExecutor, meta);
      return (await readLog(runsDir, meta.id)).includes(`starting at step ${step + 1} (launch 2`);
    }, 'the resumed pod');
    expect((await readLog(runsDir, meta.id)).match(/^=== launch 2 /gm)).toHaveLength(1);
    // With the volume, metrics.jsonl is the pod's own: written once per step, resumed after the checkpoint.
    const steps = (await readMetrics(runsDir, meta.id)).map((point) => point.step ?? 0);
    expect(steps.slice(0, step)).toEqual(range(1, step));
    expect(steps.every((value, index) => index === 0 || value > (steps[index - 1] ?? 0))).toBe(true);
    await pvcExecutor.terminate(meta, { graceMs: 5_000, reason: 'stop' });
    await pvcExecutor.close();
  });

  it('stop deletes the Job with propagationPolicy Foreground, and its pods, ConfigMap go with it', async () => {
    const meta = await launch(executor, await makeRun(runsDir, { args: ['--steps', '100000'] }));
    await waitFor(async () => {
      await stateOf(executor, meta);
      return stepLines(await readLog(runsDir, meta.id)).length >= 2;
    }, 'two steps');
    const state = await executor.terminate(meta, { graceMs: 5_000, reason: 'stop' });
    expect(state).toEqual({ kind: 'signaled', signal: 'SIGTERM' });
    const deletes = emulator.calls.filter(
      (call) => call.verb === 'delete' && call.resource === 'jobs' && call.name === meta.jobId,
    );
    expect(deletes.map((call) => call.query.propagationPolicy)).toEqual(['Foreground']);
    expect(emulator.jobs('ml').some((job) => job.metadata.name === meta.jobId)).toBe(false);
    expect(emulator.pods('ml').some((pod) => pod.metadata.labels?.['job-name'] === meta.jobId)).toBe(false);
    expect(
      emulator.objects('configmaps', 'ml').some((entry) => entry.metadata.name === `${meta.jobId}-files`),
    ).toBe(false);
    expect(await readLog(runsDir, meta.id)).toContain('SIGTERM handled: checkpoint at step');
  });

  it('under Kueue: waits for admission, pause deletes the Job once its pod checkpointed, resume creates a new Job', async () => {
    const kueue = newExecutor(emulator, runsDir, testSettings({ queue: 'team-a' }));
    emulator.setKueueAutoAdmit(false);
    let meta = await launch(kueue, await makeRun(runsDir, { args: ['--steps', '100000'] }));
    const first = meta.jobId;
    const created = emulator.jobs('ml').find((job) => job.metadata.name === first);
    expect(created?.metadata.labels?.['kueue.x-k8s.io/queue-name']).toBe('team-a');
    expect(await stateOf(kueue, meta)).toEqual({
      kind: 'pending',
      reason: 'waiting for Kueue to admit it (queue team-a)',
    });
    emulator.admit('ml', first ?? '');
    emulator.setKueueAutoAdmit(true);
    await waitFor(async () => {
      await stateOf(kueue, meta);
      return stepLines(await readLog(runsDir, meta.id)).length >= 3;
    }, 'three steps');
    expect(await kueue.terminate(meta, { graceMs: 5_000, reason: 'pause' })).toEqual({
      kind: 'signaled',
      signal: 'SIGTERM',
    });
    expect(emulator.jobs('ml').some((job) => job.metadata.name === first)).toBe(false);
    expect(await readLog(runsDir, meta.id)).toContain('SIGTERM handled: checkpoint at step');
    meta = await launch(kueue, { ...meta, launchCount: 2 });
    expect(meta.jobId).not.toBe(first);
    expect(meta.jobId?.endsWith('-2')).toBe(true);
    await waitForState(kueue, meta, (state) => state.kind === 'alive', 'the new Job to run');
    await kueue.terminate(meta, { graceMs: 5_000, reason: 'stop' });
    await kueue.close();
  });
});

describe('states', () => {
  it('Unschedulable is pending with the scheduler message; stop takes it out', async () => {
    const message =
      '0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.';
    const run = await makeRun(runsDir, { gpus: 16 });
    emulator.setBehaviour((pod) =>
      pod.metadata.labels?.['shepherd.dev/run'] === run.id
        ? { kind: 'unschedulable', message }
        : { kind: 'run' },
    );
    const meta = await launch(executor, run);
    expect(
      await waitForState(
        executor,
        meta,
        (state) => state.kind === 'pending' && state.reason === message,
        'Unschedulable',
      ),
    ).toEqual({
      kind: 'pending',
      reason: message,
    });
    await executor.terminate(meta, { graceMs: 5_000, reason: 'stop' });
    expect(emulator.jobs('ml').some((job) => job.metadata.name === meta.jobId)).toBe(false);
    emulator.setBehaviour(() => ({ kind: 'run' }));
  });

  it('ImagePullBackOff fails the run with the reason, once, and frees the node', async () => {
    const run = await makeRun(runsDir, { image: 'registry.example.com/missing:404' });
    emulator.setBehaviour((pod) =>
      pod.metadata.labels?.['shepherd.dev/run'] === run.id
        ? {
            kind: 'image-pull-error',
            message: 'rpc error: code = NotFound desc = failed to pull and unpack image',
          }
        : { kind: 'run' },
    );
    const meta = await launch(executor, run);
    const state = await waitForState(executor, meta, ended, 'the image error');
    expect(state).toMatchObject({ kind: 'exited', exitCode: 1 });
    expect(state.kind === 'exited' ? state.reason : '').toMatch(/^(ErrImagePull|ImagePullBackOff): /);
    expect(emulator.jobs('ml').some((job) => job.metadata.name === meta.jobId)).toBe(false);
    // The Job is gone; later polls still know how it ended, and the reason is in output.log once.
    expect(await stateOf(executor, meta)).toEqual(state);
    expect(
      (await readLog(runsDir, meta.id)).match(/^\[shepherd\] Kubernetes: (ErrImagePull|ImagePullBackOff)/gm),
    ).toHaveLength(1);
    emulator.setBehaviour(() => ({ kind: 'run' }));
  });

  it('OOMKilled fails the run as out of memory', async () => {
    const meta = await launch(executor, await makeRun(runsDir, { args: ['--steps', '100000'] }));
    const pod = await waitFor(() => {
      const found = emulator.pods('ml').find((entry) => entry.metadata.labels?.['job-name'] === meta.jobId);
      return found?.status?.phase === 'Running' ? found : undefined;
    }, 'the pod to run');
    expect(emulator.oomKill('ml', pod.metadata.name ?? '')).toBe(true);
    expect(await waitForState(executor, meta, ended, 'the OOM kill')).toEqual({
      kind: 'exited',
      exitCode: 137,
      crashClass: 'out_of_memory',
      reason: 'out of memory (OOMKilled)',
    });
  });

  it("a Failed Job ends with the container's exit code", async () => {
    const meta = await launch(executor, await makeRun(runsDir, { args: ['--steps', '2', '--exit', '3'] }));
    expect(await waitForState(executor, meta, ended, 'the failure')).toEqual({ kind: 'exited', exitCode: 3 });
    // A stop that comes after the end reports the end (the run-service then records it, not a stop).
    expect(await executor.terminate(meta, { graceMs: 5_000, reason: 'stop' })).toEqual({
      kind: 'exited',
      exitCode: 3,
    });
  });
});

describe('other Jobs, several nodes, the cluster', () => {
  it("watches a Job someone else created: follows its pod's log, stop deletes it (Foreground)", async () => {
    const program =
      'import time\nfor i in range(100000):\n    print("their step", i, flush=True)\n    time.sleep(0.05)\n';
    emulator.createForeignJob('research', {
      metadata: { name: 'their-job', labels: { team: 'research' } },
      spec: {
        backoffLimit: 2,
        template: {
          spec: {
            restartPolicy: 'Never',
            containers: [{ name: 'main', image: 'python:3.12', command: ['python', '-c', program] }],
          },
        },
      },
    });
    const meta = await makeRun(runsDir, {
      watch: { source: 'kubernetes', namespace: 'research', job: 'their-job' },
    });
    await waitFor(async () => {
      await stateOf(executor, meta);
      return (await readLog(runsDir, meta.id)).includes('their step 5\n');
    }, 'the watched log');
    expect(await stateOf(executor, meta)).toEqual({ kind: 'alive' });
    expect(await readLog(runsDir, meta.id)).toMatch(
      /^=== launch 1 at .* \(watched, kubernetes job research\/their-job\) ===$/m,
    );
    await expect(
      executor.launch({ meta, runDir: path.join(runsDir, meta.id), gpuIndices: [] }),
    ).rejects.toMatchObject({ code: 'watched_run' });
    expect(await executor.terminate(meta, { graceMs: 5_000, reason: 'stop' })).toEqual({
      kind: 'signaled',
      signal: 'SIGTERM',
    });
    expect(emulator.jobs('research')).toEqual([]);
    const deletes = emulator.calls.filter((call) => call.verb === 'delete' && call.namespace === 'research');
    expect(deletes.map((call) => call.query.propagationPolicy)).toEqual(['Foreground']);
  });

  it('--nodes 2 makes an Indexed Job with a headless Service and the torchrun environment', async () => {
    const meta = await launch(
      executor,
      await makeRun(runsDir, { nodes: 2, gpus: 1, args: ['--steps', '3'] }),
    );
    const name = meta.jobId ?? '';
    const job = emulator.jobs('ml').find((entry) => entry.metadata.name === name);
    expect(job?.spec).toMatchObject({ completionMode: 'Indexed', completions: 2, parallelism: 2 });
    expect(job?.spec.template.spec.subdomain).toBe(name);
    const service = emulator.objects('services', 'ml').find((entry) => entry.metadata.name === name) as
      | WireService
      | undefined;
    expect(service?.spec).toMatchObject({
      clusterIP: 'None',
      selector: { 'batch.kubernetes.io/job-name': name },
    });
    expect(service?.metadata.ownerReferences?.[0]?.uid).toBe(job?.metadata.uid);
    const pods = await waitFor(() => {
      const found = emulator.pods('ml').filter((pod) => pod.metadata.labels?.['job-name'] === name);
      return found.length === 2 ? found : undefined;
    }, 'two pods');
    expect(pods.map((pod) => pod.spec.hostname).sort()).toEqual([`${name}-0`, `${name}-1`]);
    const environment = Object.fromEntries(
      (job?.spec.template.spec.containers[0]?.env ?? []).map((entry) => [
        entry.name,
        entry.value ?? entry.valueFrom,
      ]),
    );
    expect(environment).toMatchObject({
      MASTER_ADDR: `${name}-0.${name}`,
      MASTER_PORT: '29500',
      WORLD_SIZE: '2',
      NODE_RANK: {
        fieldRef: { fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']" },
      },
    });
    expect(await waitForState(executor, meta, ended, 'both ranks to finish')).toEqual({
      kind: 'exited',
      exitCode: 0,
    });
    // Rank 0's log is the run's; it saw its rank through the downward API.
    expect(await readLog(runsDir, meta.id)).toContain('(launch 1, rank 0)');
  });

  it('reports the GPU nodes and the namespace, queue and volume', async () => {
    const info = await executor.clusterInfo();
    expect(info.executor).toBe('kubernetes');
    expect(info.nodes).toEqual([
      { name: 'gpu-node-1', state: 'ready', gpusTotal: 8, gpusAllocated: 0 },
      { name: 'gpu-node-2', state: 'not ready', gpusTotal: 8, gpusAllocated: 0 },
    ]);
    expect(info.gpusTotal).toBe(16);
    expect(info.gpusFree).toBe(8);
    expect(info.notes).toContain('namespace ml');
    expect(await executor.placement?.({ gpus: 2, maxHours: 1, nodes: 2 })).toEqual({
      description: 'Kubernetes namespace ml, image registry.example.com/train:1, 2 nodes',
      hourlyUsd: 10,
      notes: ["no SHEPHERD_K8S_PVC: checkpoints won't outlive the pod, and metrics come from the pod's log"],
    });
  });
});

describe('RBAC', () => {
  it('deploy/kubernetes/rbac.yaml grants exactly the calls these tests made: each is used, none was refused', async () => {
    const granted = await grantedCalls();
    const made = new Set(
      emulator.calls
        .filter((call) => call.status < 300)
        .map((call) => `${call.group}/${call.resource}/${call.verb}`),
    );
    expect(emulator.calls.filter((call) => call.denied === 'rbac')).toEqual([]);
    expect([...made].sort()).toEqual([...granted].sort());
  });
});
