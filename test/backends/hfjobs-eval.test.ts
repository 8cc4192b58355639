import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type HfJobsEmulator, startHfJobsEmulator } from '../emulators/hf-jobs-server.js';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { EVAL_PY } from '../helpers/eval-scripts.js';
import { cardsTitled } from '../helpers/flow.js';
import { deleteKeysWithPrefix, uniquePrefix } from '../helpers/redis.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { outputOf, until } from './remote-flow.js';

/*
 * `--eval` on HF Jobs through the playground: the job's command (a real process under the emulated Jobs API)
 * runs the eval in the job's directory after training exits 0, and reports through the job's log only
 * (markers, `[eval]` lines, the saved model), since Shepherd never sees the job's files. Shepherd turns
 * those lines into the same run files as the other backends: status `evaluating`, then `completed` with the
 * eval results on the model-ready card, or a failed eval's alert with the training result kept.
 */

/** Prints steps and an eval dict during training, saves its model directory in the job, exits 0. */
const TRAIN_PY = `import os, time, shepherd
for step in range(1, 5):
    print("step=%d loss=%s" % (step, 1.0 / step), flush=True)
    time.sleep(0.05)
print({'eval_loss': 0.5, 'epoch': 1.0}, flush=True)
os.makedirs("out/final", exist_ok=True)
shepherd.save_model("out/final", base_model="gpt2")
shepherd.finish()
`;

const BAD_EVAL_PY = `raise RuntimeError("eval exploded on purpose")
`;

/** Runs until the job is cancelled. */
const LONG_EVAL_PY = `import time
print("eval: started", flush=True)
while True:
    time.sleep(0.1)
`;

interface MetaFile {
  status: string;
  exitCode?: number;
  evaluation?: { status: string; exitCode?: number; results: Record<string, number> };
  model?: { path: string; location?: string };
}

describe('--eval on HF Jobs (emulated Jobs API, real job processes, reports through the log)', () => {
  let emulator: HfJobsEmulator;
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  const prefix = uniquePrefix('hf-eval');
  const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-hf-eval-'));
  const workspace = mkdtempSync(join(tmpdir(), 'shepherd-hf-eval-workspace-'));
  const metaOf = (runId: string) =>
    JSON.parse(readFileSync(join(dataDir, 'runs', runId, 'meta.json'), 'utf8')) as MetaFile;

  beforeAll(async () => {
    writeFileSync(join(workspace, 'train_ok.py'), TRAIN_PY);
    writeFileSync(join(workspace, 'eval.py'), EVAL_PY);
    writeFileSync(join(workspace, 'bad_eval.py'), BAD_EVAL_PY);
    writeFileSync(join(workspace, 'long_eval.py'), LONG_EVAL_PY);
    emulator = await startHfJobsEmulator({ schedulingMs: 200 });
    llm = await startScriptedOpenAi({ fallback: { text: 'ok' } });
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_BACKENDS: 'hf',
        SHEPHERD_HUB_URL: emulator.url,
        SHEPHERD_HUB_TOKEN: emulator.token,
        SHEPHERD_HF_NAMESPACE: emulator.namespace,
        SHEPHERD_HF_IMAGE: 'python:3.12-slim',
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_GPUS: '0',
        SHEPHERD_APPROVERS: 'bob',
        SHEPHERD_SELF_APPROVAL: 'false',
        SHEPHERD_MONITOR_INTERVAL_S: '0.5',
        SHEPHERD_MAX_AUTOFIX: '0',
        SHEPHERD_STOP_GRACE_S: '3',
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

  async function approve(threadId: string, name: string): Promise<string> {
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, name).some((card) => card.card?.actions !== undefined),
      20_000,
    );
    const card = cardsTitled(messages, name)[0];
    const button = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect(button, 'an Approve button').toBeDefined();
    expect((await shepherd.click(threadId, card?.id ?? '', button?.actionId ?? '', 'bob')).status).toBe(200);
    return (await shepherd.app.features.runs.find(name)).id;
  }

  it('runs the eval in the job after training: evaluating, then completed with the results on the model-ready card', {
    timeout: 120_000,
  }, async () => {
    const release = join(workspace, 'release-eval');
    const threadId = await shepherd.mention(
      `run train_ok.py --on hf --gpus 1 --name hf-eval --eval "python3 -u ${join(workspace, 'eval.py')} ${release}"`,
      'alice',
    );
    const runId = await approve(threadId, 'hf-eval');

    await until(() => metaOf(runId).status === 'evaluating', 'status evaluating', 60_000);
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => /hf-eval: training finished; evaluating/.test(message.text)),
    );
    writeFileSync(release, 'go');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Model ready: hf-eval').length > 0,
      60_000,
    );
    const meta = metaOf(runId);
    expect(meta.status).toBe('completed');
    expect(meta.exitCode).toBe(0);
    expect(meta.evaluation).toEqual({
      status: 'passed',
      exitCode: 0,
      results: { eval_loss: 0.25, eval_accuracy: 0.875, eval_bleu: 31.5 },
      startedAt: expect.any(String),
      endedAt: expect.any(String),
    });
    // The model is the job's directory, never a path on Shepherd's host.
    const [job] = emulator.allJobs();
    expect(meta.model?.path).toMatch(/\/shepherd-run\/out\/final$/);
    expect(meta.model?.location).toBe(`HF job ${job?.id}`);
    const ready = cardsTitled(messages, 'Model ready: hf-eval')[0] as PlaygroundMessage;
    expect(ready.card?.text).toContain('eval_loss 0.25, eval_accuracy 0.875, eval_bleu 31.5');
    expect(ready.card?.text).toContain(`(in HF job ${job?.id})`);

    // The eval's output is in eval.log as locally; the markers are not in what users read.
    const runDir = join(dataDir, 'runs', runId);
    expect(readFileSync(join(runDir, 'eval.log'), 'utf8')).toMatch(/evaluating in .*\/shepherd-run\n/);
    const output = outputOf(dataDir, runId);
    expect(output).toContain('=== evaluation ended: exit code 0 ===');
    expect(output).not.toContain('[shepherd:evaluation]');
    expect(output).not.toContain('[shepherd:model]');

    // Push to Hub cannot read the job's files: refused with a sentence, no approval card.
    const push = ready.card?.actions?.find((action) => action.label === 'Push to Hub');
    expect((await shepherd.click(threadId, ready.id, push?.actionId ?? '', 'alice')).status).toBe(200);
    const after = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => /whose files Shepherd cannot read/.test(message.text)),
    );
    expect(cardsTitled(after, 'to the Hub?')).toHaveLength(0);
  });

  it('a failed eval is one alert with its traceback; the training result stays', {
    timeout: 120_000,
  }, async () => {
    const threadId = await shepherd.mention(
      `run train_ok.py --on hf --gpus 1 --name hf-bad-eval --eval "python3 -u ${join(workspace, 'bad_eval.py')}"`,
      'alice',
    );
    const runId = await approve(threadId, 'hf-bad-eval');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'hf-bad-eval: evaluation failed').length > 0,
      60_000,
    );
    const meta = metaOf(runId);
    expect(meta.status).toBe('completed');
    expect(meta.exitCode).toBe(0);
    expect(meta.evaluation).toMatchObject({ status: 'failed', exitCode: 1 });
    const alert = cardsTitled(messages, 'hf-bad-eval: evaluation failed')[0]?.card;
    expect(alert?.text).toContain('RuntimeError: eval exploded on purpose');
    expect(alert?.text).toContain('The training result and its checkpoints stay.');
    const after = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Model ready: hf-bad-eval').length > 0,
    );
    expect(cardsTitled(after, 'Model ready: hf-bad-eval')[0]?.card?.text).toContain('The evaluation failed');
    expect(cardsTitled(after, 'evaluation failed')).toHaveLength(1);
    expect(botMessages(after).some((message) => /hf-bad-eval failed/.test(message.text))).toBe(false);
  });

  it('stop during the eval cancels the job: the run is stopped, with no alert and no finished card', {
    timeout: 120_000,
  }, async () => {
    const threadId = await shepherd.mention(
      `run train_ok.py --on hf --gpus 1 --name hf-eval-stop --eval "python3 -u ${join(workspace, 'long_eval.py')}"`,
      'alice',
    );
    const runId = await approve(threadId, 'hf-eval-stop');
    await until(() => metaOf(runId).status === 'evaluating', 'status evaluating', 60_000);
    await until(() => outputOf(dataDir, runId).includes('eval: started'), 'the eval to start');
    const jobId = (await shepherd.app.features.runs.find('hf-eval-stop')).jobId ?? '';
    await shepherd.reply(threadId, 'stop hf-eval-stop', 'alice');
    await until(() => metaOf(runId).status === 'stopped', 'status stopped', 60_000);
    expect(emulator.job(jobId)?.status.stage).toBe('CANCELED');
    expect(emulator.pidOf(jobId)).toBeUndefined();
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => /^Stopped hf-eval-stop/.test(message.text)),
    );
    // A few monitor ticks for a wrong alert to show up.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const after = await shepherd.messages(threadId);
    expect(cardsTitled(after, 'hf-eval-stop: evaluation failed')).toHaveLength(0);
    expect(cardsTitled(after, 'hf-eval-stop failed')).toHaveLength(0);
    expect(cardsTitled(after, 'hf-eval-stop finished')).toHaveLength(0);
    expect(cardsTitled(after, 'Model ready: hf-eval-stop')).toHaveLength(0);
  });
});
