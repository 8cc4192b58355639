import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubernetesEmulator, startKubernetesEmulator } from '../emulators/kubernetes-api-server.js';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { EVAL_PY, EVAL_TRAIN_PY } from '../helpers/eval-scripts.js';
import { cardsTitled } from '../helpers/flow.js';
import { deleteKeysWithPrefix, uniquePrefix } from '../helpers/redis.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { until } from './remote-flow.js';

/*
 * `--eval` on Kubernetes through the playground: the pod's command (a real process under the emulated
 * kubelet) runs the eval in the run directory on the PVC after training exits 0, so Shepherd sees status
 * `evaluating`, then `completed` with the eval results.
 */

/** Runs until a TERM, then says so and exits 0: a stopped run must still not be evaluated. */
const LONG_PY = `import signal, sys, time
def stop(signum, frame):
    print("train: got TERM", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("train: started", flush=True)
while True:
    time.sleep(0.1)
`;

interface MetaFile {
  status: string;
  exitCode?: number;
  evaluation?: { status: string; exitCode?: number; results: Record<string, number> };
}

describe('--eval on Kubernetes (emulated API server, real pod processes, run directories on the PVC)', () => {
  let emulator: KubernetesEmulator;
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  const prefix = uniquePrefix('k8s-eval');
  const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-k8s-eval-'));
  const workspace = mkdtempSync(join(tmpdir(), 'shepherd-k8s-eval-workspace-'));
  const kubeconfig = join(mkdtempSync(join(tmpdir(), 'shepherd-kubeconfig-')), 'config');
  const metaOf = (runId: string) =>
    JSON.parse(readFileSync(join(dataDir, 'runs', runId, 'meta.json'), 'utf8')) as MetaFile;

  beforeAll(async () => {
    mkdirSync(join(dataDir, 'runs'), { recursive: true });
    writeFileSync(join(workspace, 'train_ok.py'), EVAL_TRAIN_PY);
    writeFileSync(join(workspace, 'eval.py'), EVAL_PY);
    writeFileSync(join(workspace, 'train_long.py'), LONG_PY);
    // The claim is the bot's runs directory, as deploy/kubernetes mounts it.
    emulator = await startKubernetesEmulator({
      namespaces: ['ml'],
      volumes: { 'shepherd-runs': join(dataDir, 'runs') },
    });
    writeFileSync(kubeconfig, emulator.kubeConfigFile('ml'));
    llm = await startScriptedOpenAi({ fallback: { text: 'ok' } });
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_BACKENDS: 'k8s',
        KUBECONFIG: kubeconfig,
        SHEPHERD_K8S_NAMESPACE: 'ml',
        SHEPHERD_K8S_IMAGE: 'registry.example.com/train:1',
        SHEPHERD_K8S_PVC: 'shepherd-runs',
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_GPUS: '0',
        SHEPHERD_APPROVERS: 'bob',
        SHEPHERD_SELF_APPROVAL: 'false',
        SHEPHERD_MONITOR_INTERVAL_S: '0.5',
        SHEPHERD_MAX_AUTOFIX: '0',
        SHEPHERD_STOP_GRACE_S: '20',
      },
      prefix,
      dataDir,
    });
  });
  afterAll(async () => {
    await shepherd?.stop();
    await emulator?.close();
    await llm?.close();
    await deleteKeysWithPrefix(prefix);
    rmSync(workspace, { recursive: true, force: true });
  });

  it('runs the eval in the run directory after training, status evaluating, then completed with its results', {
    timeout: 120_000,
  }, async () => {
    const release = join(workspace, 'release-eval');
    const threadId = await shepherd.mention(
      `run train_ok.py --on k8s --gpus 1 --name k8s-eval --eval "python3 -u ${join(workspace, 'eval.py')} ${release}"`,
      'alice',
    );
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'k8s-eval').some((card) => card.card?.actions !== undefined),
      20_000,
    );
    const card = cardsTitled(messages, 'k8s-eval')[0];
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect(approve, 'an Approve button').toBeDefined();
    expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);
    const run = await shepherd.app.features.runs.find('k8s-eval');

    await until(() => metaOf(run.id).status === 'evaluating', 'status evaluating', 60_000);
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => /k8s-eval: training finished; evaluating/.test(message.text)),
    );
    writeFileSync(release, 'go');
    await until(() => metaOf(run.id).status === 'completed', 'status completed', 60_000);
    const meta = metaOf(run.id);
    expect(meta.exitCode).toBe(0);
    expect(meta.evaluation).toEqual({
      status: 'passed',
      exitCode: 0,
      results: { eval_loss: 0.25, eval_accuracy: 0.875, eval_bleu: 31.5 },
      startedAt: expect.any(String),
      endedAt: expect.any(String),
    });
    const runDir = join(dataDir, 'runs', run.id);
    expect(readFileSync(join(runDir, 'eval.log'), 'utf8')).toContain(`evaluating in ${runDir}\n`);
  });

  it('passes a stop on to training (bash is PID 1) and does not evaluate a stopped run', {
    timeout: 120_000,
  }, async () => {
    const threadId = await shepherd.mention(
      `run train_long.py --on k8s --gpus 1 --name k8s-eval-stop --eval "python3 -c pass"`,
      'alice',
    );
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'k8s-eval-stop').some((card) => card.card?.actions !== undefined),
      20_000,
    );
    const card = cardsTitled(messages, 'k8s-eval-stop')[0];
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);
    const run = await shepherd.app.features.runs.find('k8s-eval-stop');
    const runDir = join(dataDir, 'runs', run.id);
    const output = () => {
      try {
        return readFileSync(join(runDir, 'output.log'), 'utf8');
      } catch {
        return '';
      }
    };
    await until(() => output().includes('train: started'), 'training to start', 60_000);
    const startedStop = Date.now();
    await shepherd.reply(threadId, 'stop k8s-eval-stop', 'alice');
    await until(() => metaOf(run.id).status === 'stopped', 'status stopped', 60_000);
    await until(() => output().includes('train: got TERM'), 'the TERM in training', 20_000);
    // Well within the 20 s grace: the TERM reached training, not the kubelet's SIGKILL.
    expect(Date.now() - startedStop).toBeLessThan(15_000);
    expect(existsSync(join(runDir, 'evaluation.json'))).toBe(false);
  });
});
