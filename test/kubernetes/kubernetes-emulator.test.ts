import { Writable } from 'node:stream';
import {
  ApiException,
  BatchV1Api,
  CoreV1Api,
  KubeConfig,
  Log,
  PatchStrategy,
  setHeaderOptions,
  type V1Job,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubernetesEmulator, startKubernetesEmulator } from '../emulators/kubernetes-api-server.js';
import { makeRunsDir, newExecutor, waitFor } from './kubernetes-harness.js';

/*
 * The emulator answers as an API server does, through the real client: it refuses what a real one
 * refuses (a Job whose pods could restart, a label value over 63 characters, a ConfigMap over 1 MiB, a
 * name taken), orphans a Job's pods when deleted without a propagationPolicy, and streams logs.
 */

let emulator: KubernetesEmulator;
let batch: BatchV1Api;
let core: CoreV1Api;

beforeAll(async () => {
  emulator = await startKubernetesEmulator({
    authorize: ({ resource }) => resource !== 'nodes',
  });
  batch = emulator.kubeConfig().makeApiClient(BatchV1Api);
  core = emulator.kubeConfig().makeApiClient(CoreV1Api);
});

afterAll(async () => {
  await emulator?.close();
});

function sleeper(name: string, overrides: Partial<NonNullable<V1Job['spec']>> = {}): V1Job {
  const program =
    'import time\nfor i in range(100000):\n    print("tick", i, flush=True)\n    time.sleep(0.05)\n';
  return {
    metadata: { name },
    spec: {
      backoffLimit: 0,
      template: {
        spec: {
          restartPolicy: 'Never',
          terminationGracePeriodSeconds: 2,
          containers: [{ name: 'main', image: 'python:3.12', command: ['python', '-c', program] }],
        },
      },
      ...overrides,
    },
  };
}

/** The Status body of a refused call. */
async function refusal(call: Promise<unknown>): Promise<{ code: number; reason?: string; message?: string }> {
  const error = await call.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!(error instanceof ApiException)) throw new Error(`expected an ApiException, got ${String(error)}`);
  const body = JSON.parse(String(error.body)) as { reason?: string; message?: string };
  return { code: error.code, ...body };
}

describe('refusals', () => {
  it('a Job whose pods could restart (no restartPolicy: Always by default) is 422 Invalid', async () => {
    const job = sleeper('restarts');
    delete job.spec?.template.spec?.restartPolicy;
    expect(await refusal(batch.createNamespacedJob({ namespace: 'ml', body: job }))).toMatchObject({
      code: 422,
      reason: 'Invalid',
      message:
        'Job.batch "restarts" is invalid: spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never"',
    });
  });

  it('a label value over 63 characters is 422 Invalid', async () => {
    const job = sleeper('long-label');
    job.metadata = { name: 'long-label', labels: { team: 'x'.repeat(64) } };
    const refused = await refusal(batch.createNamespacedJob({ namespace: 'ml', body: job }));
    expect(refused).toMatchObject({ code: 422, reason: 'Invalid' });
    expect(refused.message).toContain('metadata.labels: Invalid value: "xxxx');
    expect(refused.message).toContain('must be no more than 63 characters');
  });

  it('a ConfigMap over 1 MiB is 422 Invalid; one under it is created', async () => {
    const big = { metadata: { name: 'big' }, data: { 'train.py': 'x'.repeat(1024 * 1024) } };
    expect(await refusal(core.createNamespacedConfigMap({ namespace: 'ml', body: big }))).toMatchObject({
      code: 422,
      reason: 'Invalid',
      message: 'ConfigMap "big" is invalid: []: Too long: must have at most 1048576 bytes',
    });
    const fits = { metadata: { name: 'fits' }, data: { 'train.py': 'x'.repeat(1024 * 1024 - 100) } };
    expect((await core.createNamespacedConfigMap({ namespace: 'ml', body: fits })).metadata?.name).toBe(
      'fits',
    );
  });

  it('a name taken is 409 AlreadyExists', async () => {
    await batch.createNamespacedJob({ namespace: 'ml', body: sleeper('taken') });
    expect(
      await refusal(batch.createNamespacedJob({ namespace: 'ml', body: sleeper('taken') })),
    ).toMatchObject({
      code: 409,
      reason: 'AlreadyExists',
      message: 'jobs.batch "taken" already exists',
    });
    await batch.deleteNamespacedJob({ name: 'taken', namespace: 'ml', propagationPolicy: 'Foreground' });
  });

  it('no token is 401; a verb RBAC does not grant is 403 Forbidden', async () => {
    const anonymous = new KubeConfig();
    anonymous.loadFromOptions({
      clusters: [{ name: 'emulator', server: emulator.url, skipTLSVerify: true }],
      users: [{ name: 'nobody' }],
      contexts: [{ name: 'emulator', cluster: 'emulator', user: 'nobody' }],
      currentContext: 'emulator',
    });
    const error = await anonymous
      .makeApiClient(BatchV1Api)
      .listNamespacedJob({ namespace: 'ml' })
      .catch((caught: unknown) => caught);
    expect((error as ApiException<unknown>).code).toBe(401);
    expect(await refusal(core.listNode())).toMatchObject({ code: 403, reason: 'Forbidden' });
  });

  it("a merge-style body sent as client-node's default JSON Patch is 400; as a merge patch it applies", async () => {
    await core.createNamespacedConfigMap({
      namespace: 'ml',
      body: { metadata: { name: 'patched' }, data: { a: '1' } },
    });
    const body = { data: { a: '2' } };
    expect(
      (await refusal(core.patchNamespacedConfigMap({ namespace: 'ml', name: 'patched', body }))).code,
    ).toBe(400);
    const merged = await core.patchNamespacedConfigMap(
      { namespace: 'ml', name: 'patched', body },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(merged.data).toEqual({ a: '2' });
  });
});

describe('deletion', () => {
  const podsOf = (job: string) =>
    emulator.pods('ml').filter((pod) => pod.metadata.labels?.['job-name'] === job);
  const running = (job: string) => () => podsOf(job).some((pod) => pod.status?.phase === 'Running');

  it("deleting a Job without a propagationPolicy leaves its pods running (batch/v1's default: orphan)", async () => {
    await batch.createNamespacedJob({ namespace: 'ml', body: sleeper('orphaning') });
    await waitFor(running('orphaning'), 'the pod to run');
    await batch.deleteNamespacedJob({ name: 'orphaning', namespace: 'ml' });
    expect(emulator.jobs('ml').some((job) => job.metadata.name === 'orphaning')).toBe(false);
    expect(running('orphaning')()).toBe(true);
    expect(podsOf('orphaning')[0]?.metadata.ownerReferences).toEqual([]);
  });

  it('Foreground deletes the pods first (SIGTERM, SIGKILL after the grace period), then the Job', async () => {
    await batch.createNamespacedJob({ namespace: 'ml', body: sleeper('foreground') });
    await waitFor(running('foreground'), 'the pod to run');
    const answer = await batch.deleteNamespacedJob({
      name: 'foreground',
      namespace: 'ml',
      propagationPolicy: 'Foreground',
    });
    expect(answer).toBeDefined();
    const deleting = emulator.jobs('ml').find((job) => job.metadata.name === 'foreground');
    expect(deleting?.metadata.finalizers).toContain('foregroundDeletion');
    await waitFor(
      () => emulator.jobs('ml').every((job) => job.metadata.name !== 'foreground'),
      'the Job to go',
    );
    expect(podsOf('foreground')).toEqual([]);
  });
});

describe('logs', () => {
  it('follows a running container, stamps lines with nanoseconds, and keeps lines from sinceTime on', async () => {
    await batch.createNamespacedJob({ namespace: 'ml', body: sleeper('logger') });
    const pod = await waitFor(
      () =>
        emulator
          .pods('ml')
          .find(
            (entry) => entry.metadata.labels?.['job-name'] === 'logger' && entry.status?.phase === 'Running',
          ),
      'the pod',
    );
    let text = '';
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        text += chunk.toString('utf8');
        callback();
      },
    });
    const log = new Log(emulator.kubeConfig());
    const stream = await log.log('ml', pod.metadata.name ?? '', 'main', sink, {
      follow: true,
      timestamps: true,
    });
    await waitFor(() => (text.match(/\n/g)?.length ?? 0) >= 10, 'ten followed lines');
    stream.abort();
    const lines = text.split('\n').filter((line) => line !== '');
    expect(lines[0]).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z tick 0$/);
    const later = lines[5]?.split(' ')[0] ?? '';
    let since = '';
    const sinceSink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        since += chunk.toString('utf8');
        callback();
      },
    });
    const ended = new Promise((resolve) => sinceSink.once('finish', resolve));
    await log.log('ml', pod.metadata.name ?? '', 'main', sinceSink, {
      follow: false,
      timestamps: true,
      sinceTime: later,
    });
    await ended;
    expect(since.split('\n')[0]?.split(' ')[0]).toBe(later);
    expect(since).not.toContain(' tick 0\n');
    await batch.deleteNamespacedJob({ name: 'logger', namespace: 'ml', propagationPolicy: 'Foreground' });
  });
});

describe('an executor without the nodes ClusterRole', () => {
  it('says it cannot list nodes and still reports the namespace', async () => {
    const executor = newExecutor(emulator, await makeRunsDir());
    const info = await executor.clusterInfo();
    expect(info.nodes).toBeUndefined();
    expect(info.gpusTotal).toBe(0);
    expect(info.notes).toContain(
      'cannot list nodes: grant the shepherd-nodes ClusterRole (deploy/kubernetes/rbac.yaml) to see GPU capacity',
    );
    expect(info.notes).toContain('namespace ml');
    await executor.close();
  });
});
