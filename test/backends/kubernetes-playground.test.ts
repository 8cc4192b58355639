import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubernetesEmulator, startKubernetesEmulator } from '../emulators/kubernetes-api-server.js';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { deleteKeysWithPrefix, uniquePrefix } from '../helpers/redis.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { rbacAuthorizer } from '../kubernetes/kubernetes-harness.js';
import { outputOf, steps, until } from './remote-flow.js';

/**
 * Scenario 12 on Kubernetes, end to end through the playground against the API emulator (which enforces
 * deploy/kubernetes/rbac.yaml and runs each pod's container as a real process): `--on k8s` names the
 * namespace and queue on the card, the approved Job has the GPUs, deadline, labels and script, the pod log
 * flows into output.log and a NaN alert with a chart, `stop` deletes the Job, `watch k8s:<ns>/<job>`
 * follows a Job created by someone else, and a bot restart in the middle re-attaches.
 */

const SCRIPT = 'test/fixtures/remote_train.py';

describe('Kubernetes through the playground (emulated API server, real pod processes)', () => {
  let emulator: KubernetesEmulator;
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  const prefix = uniquePrefix('k8s-flow');
  const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-k8s-flow-'));
  const kubeconfig = join(mkdtempSync(join(tmpdir(), 'shepherd-kubeconfig-')), 'config');
  const environment = () => ({
    SHEPHERD_BACKENDS: 'local,k8s',
    KUBECONFIG: kubeconfig,
    SHEPHERD_K8S_NAMESPACE: 'ml',
    SHEPHERD_K8S_QUEUE: 'team-a',
    SHEPHERD_K8S_IMAGE: 'registry.example.com/train:1',
    SHEPHERD_K8S_GPU_HOUR_USD: '3',
    SHEPHERD_LLM_BASE_URL: llm.url,
    SHEPHERD_WORKSPACE: process.cwd(),
    SHEPHERD_GPUS: '0',
    SHEPHERD_APPROVERS: 'bob',
    SHEPHERD_SELF_APPROVAL: 'false',
    SHEPHERD_MONITOR_INTERVAL_S: '0.5',
    SHEPHERD_STOP_GRACE_S: '3',
  });

  beforeAll(async () => {
    emulator = await startKubernetesEmulator({
      authorize: await rbacAuthorizer(),
      namespaces: ['default', 'ml', 'research'],
    });
    writeFileSync(kubeconfig, emulator.kubeConfigFile('ml'));
    llm = await startScriptedOpenAi({ fallback: { text: 'Looking at it.' } });
    shepherd = await startTestApp({ environment: environment(), prefix, dataDir, keepState: true });
  });
  afterAll(async () => {
    await shepherd?.stop();
    await emulator?.close();
    await llm?.close();
    await deleteKeysWithPrefix(prefix);
  });

  it('launches a Job from the card, alerts on its NaN with a chart, and stop deletes it', async () => {
    const threadId = await shepherd.mention(
      `run ${SCRIPT} --on k8s --gpus 8 --hours 3 --name mistral-sft`,
      'grace',
    );
    let messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'mistral-sft').length > 0,
    );
    const card = cardsTitled(messages, 'mistral-sft')[0] as PlaygroundMessage;
    const fields = card.card?.fields ?? [];
    expect(fields.find((field) => field.label === 'Runs on')?.value).toMatch(
      /^Kubernetes namespace ml, queue team-a/,
    );
    // 8 GPUs × 3 h × SHEPHERD_K8S_GPU_HOUR_USD.
    expect(fields.find((field) => field.label === 'Est. cost')?.value).toBe('$72');
    expect(card.card?.text).toMatch(/checkpoints won.t outlive the pod/);
    const approve = card.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card.id, approve?.actionId ?? '', 'bob')).status).toBe(200);

    const job = await until(() => emulator.jobs('ml')[0], 'the Job');
    const run = await shepherd.app.features.runs.find('mistral-sft');
    expect(job.metadata?.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'shepherd',
      'shepherd.dev/run': run.id,
      'kueue.x-k8s.io/queue-name': 'team-a',
    });
    expect(job.spec?.activeDeadlineSeconds).toBe(3 * 3600);
    expect(job.spec?.backoffLimit).toBe(0);
    const container = job.spec?.template?.spec?.containers?.[0];
    expect(container?.image).toBe('registry.example.com/train:1');
    expect(container?.resources?.limits).toMatchObject({ 'nvidia.com/gpu': '8' });
    const scripts = emulator.objects('configmaps', 'ml').map((object) => JSON.stringify(object));
    expect(scripts.some((text) => text.includes('remote_train: SIGTERM'))).toBe(true);

    await until(
      () => steps(outputOf(dataDir, run.id)).length >= 5 || undefined,
      'pod log lines in output.log',
    );
    messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'mistral-sft: non-finite metric').length > 0,
      60_000,
    );
    const alert = cardsTitled(messages, 'mistral-sft: non-finite metric')[0];
    expect(alert?.card?.imageUrl ?? alert?.images?.[0]).toBeDefined();

    // get_cluster_info covers every configured backend: this host first, then the cluster's GPU nodes.
    const cluster = await shepherd.app.features.runs.clusterInfo();
    expect(cluster.executor).toBe('local');
    expect(cluster.otherBackends.map((info) => info.executor)).toEqual(['kubernetes']);
    expect(cluster.otherBackends[0]?.gpusTotal).toBeGreaterThan(0);

    await shepherd.reply(threadId, 'runs', 'carol');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /\[k8s\] mistral-sft \(/.test(m.text)),
    );
    await shepherd.reply(threadId, 'stop mistral-sft', 'grace');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /^Stopped mistral-sft/.test(m.text)),
    );
    await until(() => emulator.jobs('ml').length === 0 || undefined, 'the Job to be deleted');
    expect(emulator.pods('ml')).toEqual([]);
    const deletion = emulator.calls.find((call) => call.verb === 'delete' && call.resource === 'jobs');
    expect(JSON.stringify(deletion)).toContain('Foreground');
    const written = steps(outputOf(dataDir, run.id));
    expect(new Set(written).size).toBe(written.length);
  });

  it('watches a Job someone else created and re-attaches after a bot restart', async () => {
    emulator.createForeignJob('research', {
      metadata: { name: 'their-job', labels: { team: 'research' } },
      spec: {
        backoffLimit: 0,
        template: {
          spec: {
            restartPolicy: 'Never',
            containers: [
              { name: 'main', image: 'python:3.12', command: ['python', '-c', readFileSync(SCRIPT, 'utf8')] },
            ],
          },
        },
      },
    });
    const threadId = await shepherd.mention('watch k8s:research/their-job', 'frank');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /Watching Kubernetes Job research\/their-job/.test(m.text)),
    );
    const run = await shepherd.app.features.runs.find('their-job');
    expect(run.watch).toEqual({ source: 'kubernetes', namespace: 'research', job: 'their-job' });
    await until(() => steps(outputOf(dataDir, run.id)).length >= 5 || undefined, 'the foreign pod’s log');

    await shepherd.stop();
    const before = steps(outputOf(dataDir, run.id)).length;
    shepherd = await startTestApp({ environment: environment(), prefix, dataDir, keepState: true });
    await until(
      () => steps(outputOf(dataDir, run.id)).length > before + 10 || undefined,
      'new lines after the restart',
      60_000,
    );
    const written = steps(outputOf(dataDir, run.id));
    expect(written).toEqual(written.map((_, index) => index + 1));
    await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'their-job: non-finite metric').length > 0,
      60_000,
    );
    await shepherd.app.features.runs.service.stop(run.id, 'system');
    await until(() => emulator.jobs('research').length === 0 || undefined, 'the foreign Job to be deleted');
  });

  it('moves a paused local run to Kubernetes with resume --on k8s', async () => {
    const threadId = await shepherd.mention(`run ${SCRIPT} --gpus 0 --name movable`, 'grace');
    let messages = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'movable').length > 0);
    const card = cardsTitled(messages, 'movable')[0] as PlaygroundMessage;
    expect(card.card?.fields?.find((field) => field.label === 'Runs on')?.value).toBe('this host');
    const approve = card.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card.id, approve?.actionId ?? '', 'bob')).status).toBe(200);
    const run = await shepherd.app.features.runs.find('movable');
    await until(() => steps(outputOf(dataDir, run.id)).length >= 3 || undefined, 'the local run’s lines');
    await shepherd.reply(threadId, 'pause movable', 'grace');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /^Paused movable/.test(m.text)),
    );

    await shepherd.reply(threadId, 'resume movable --on hf', 'grace');
    messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /the hf backend is not configured here/.test(m.text)),
    );
    await shepherd.reply(threadId, 'resume movable --on k8s', 'grace');
    await until(
      () => emulator.jobs('ml').find((job) => job.metadata?.labels?.['shepherd.dev/run'] === run.id),
      'a Job for the moved run',
    );
    const moved = await shepherd.app.features.runs.find('movable');
    expect(moved.executor).toBe('kubernetes');
    expect(moved.placement).toMatch(/^Kubernetes namespace ml/);
    await shepherd.app.features.runs.service.stop(moved.id, 'system');
    await until(() => emulator.jobs('ml').length === 0 || undefined, 'the moved Job to be deleted');
  });

  it('refuses a Kubernetes Job that does not exist, and says so', async () => {
    const threadId = await shepherd.mention('watch k8s:research/nobody', 'frank');
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /was not found/.test(m.text)),
    );
    expect(
      botMessages(messages).some((m) => /Kubernetes Job research\/nobody was not found/.test(m.text)),
    ).toBe(true);
  });

  it('refuses --eval on Kubernetes without a PVC before any card, naming SHEPHERD_K8S_PVC', async () => {
    const creates = () =>
      emulator.calls.filter(
        (call) => call.verb === 'create' && ['jobs', 'configmaps'].includes(call.resource),
      ).length;
    const before = creates();
    const threadId = await shepherd.mention(
      `run ${SCRIPT} --on k8s --name k8s-no-pvc-eval --eval "python3 eval.py"`,
      'frank',
    );
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /--eval on Kubernetes needs SHEPHERD_K8S_PVC/.test(m.text)),
    );
    expect(cardsTitled(messages, 'Approve')).toEqual([]);
    expect(cardsTitled(messages, 'k8s-no-pvc-eval')).toEqual([]);
    // Nothing reached the cluster, and no run was recorded.
    expect(creates()).toBe(before);
    expect(
      emulator
        .jobs('ml')
        .some((job) => job.metadata?.annotations?.['shepherd.dev/run-name'] === 'k8s-no-pvc-eval'),
    ).toBe(false);
    await expect(shepherd.app.features.runs.find('k8s-no-pvc-eval')).rejects.toThrow();
  });
});
