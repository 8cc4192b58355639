import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { repoFile } from '../helpers/fake-hub-repos.js';
import { type FakeHubServer, HUB_SHAS, startFakeHub } from '../helpers/fake-hub-server.js';
import { cardsTitled, metricSteps } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { untilEvery } from '../helpers/until.js';

/*
 * From a finished run to a model on the (fake) Hub, in the playground with real processes: `--eval` after
 * training (status `evaluating`), the model-ready card, Push to Hub behind an approver, the model card, a
 * second push, a Hub error, Fork and Compare from the card's buttons, and an evaluation that fails.
 */

/**
 * Loss falls to its best at step 4 then rises a little; checkpoints at 2, 4, 6 (files in the run directory);
 * a model directory. A fork resumes after its checkpoint's step.
 */
const TRAIN_PY = `import json, os, shepherd
losses = {1: 2.0, 2: 1.5, 3: 1.1, 4: 0.8, 5: 0.9, 6: 0.95}
run_dir = shepherd.run_dir()
info = shepherd.resume_info()
start = 1
if info.get("checkpoint"):
    with open(os.path.join(run_dir, info["checkpoint"])) as handle:
        start = json.load(handle)["step"] + 1
    print("resumed from step %d" % (start - 1), flush=True)
for step, loss in losses.items():
    if step < start:
        continue
    shepherd.log_metrics(step=step, loss=loss)
    if step % 2 == 0:
        os.makedirs(os.path.join(run_dir, "ckpt"), exist_ok=True)
        with open(os.path.join(run_dir, "ckpt", "step%d" % step), "w") as handle:
            json.dump({"step": step}, handle)
        shepherd.save_checkpoint(step, "ckpt/step%d" % step)
out = os.path.join(os.getcwd(), "out", os.environ["SHEPHERD_RUN_ID"])
os.makedirs(os.path.join(out, "tokenizer"), exist_ok=True)
with open(os.path.join(out, "model.safetensors"), "wb") as handle:
    handle.write(bytes(range(256)) * 512)
with open(os.path.join(out, "config.json"), "w") as handle:
    handle.write('{"model_type": "tiny"}')
with open(os.path.join(out, "tokenizer", "vocab.txt"), "w") as handle:
    handle.write("a\\nb\\n")
shepherd.save_model(out, base_model="Qwen/Qwen2.5-0.5B", datasets=["openai/gsm8k"], library_name="transformers", license="apache-2.0", tags=["sft"])
print("training done", flush=True)
`;

/** Waits for the test's go (so `evaluating` can be seen), then prints an eval dict and logs one more number. */
const EVAL_PY = `import os, sys, time, shepherd
release = sys.argv[1]
deadline = time.time() + 120
while not os.path.exists(release) and time.time() < deadline:
    time.sleep(0.1)
print({'eval_loss': 0.25, 'eval_accuracy': 0.875}, flush=True)
shepherd.log_eval(eval_bleu=31.5)
`;

const BAD_EVAL_PY = `def score():
    raise RuntimeError("eval exploded on purpose")
score()
`;

interface MetaFile {
  id: string;
  status: string;
  evaluation?: { status: string; results: Record<string, number> };
  model?: { path: string };
}

function metaOf(dataDir: string, runId: string): MetaFile {
  return JSON.parse(readFileSync(join(dataDir, 'runs', runId, 'meta.json'), 'utf8')) as MetaFile;
}

const until = untilEvery({ timeoutMs: 60_000, intervalMs: 100 });

const botSaid = (messages: PlaygroundMessage[], pattern: RegExp) =>
  botMessages(messages).some((message) => pattern.test(message.text));

describe('evaluation, model-ready card and Push to Hub (playground, local executor, fake Hub)', () => {
  let llm: ScriptedLlmServer;
  let hub: FakeHubServer;
  let shepherd: TestApp;
  let workspace: string;
  let threadId: string;
  let runId: string;
  let gitCommit: string;
  let pythonDir: string;

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'ok' } });
    hub = await startFakeHub();
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-model-ws-'));
    writeFileSync(join(workspace, 'train.py'), TRAIN_PY);
    writeFileSync(join(workspace, 'eval.py'), EVAL_PY);
    writeFileSync(join(workspace, 'bad_eval.py'), BAD_EVAL_PY);
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', ...args], {
        cwd: workspace,
        encoding: 'utf8',
      });
    git('init', '-q');
    git('add', '.');
    git('commit', '-q', '-m', 'initial');
    gitCommit = git('rev-parse', 'HEAD').trim();
    // The runs' interpreter answers the environment probe late, as a slow `pip freeze` does: the run ends,
    // is pushed, and its model card must still carry the probe's answer (the push waits for it).
    pythonDir = mkdtempSync(join(tmpdir(), 'shepherd-model-python-'));
    const python = join(pythonDir, 'python3');
    // The interpreter itself, not a shim that would look python3 up on PATH again (and find this one).
    const realPython = execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], {
      encoding: 'utf8',
    }).trim();
    writeFileSync(
      python,
      `#!/bin/sh\ncase "$1" in *shepherd_env_probe.py) sleep 8;; esac\nexec ${realPython} "$@"\n`,
    );
    chmodSync(python, 0o755);
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_MONITOR_INTERVAL_S: '0.5',
        SHEPHERD_GPUS: '0',
        SHEPHERD_MAX_AUTOFIX: '0',
        SHEPHERD_APPROVERS: 'bob',
        SHEPHERD_HF_NAMESPACE: 'test-org',
        SHEPHERD_HUB_URL: hub.url,
        SHEPHERD_HUB_TOKEN: 'hf_test_write_token',
        SHEPHERD_DATASETS_SERVER_URL: hub.url,
      },
      // Runs find it first on PATH (their command is `python3 -u train.py`).
      overrides: { runEnvironment: { ...process.env, PATH: `${pythonDir}:${process.env.PATH ?? ''}` } },
    });
  }, 60_000);

  afterAll(async () => {
    await shepherd?.stop();
    await llm?.close();
    await hub?.close();
    rmSync(workspace, { recursive: true, force: true });
    rmSync(pythonDir, { recursive: true, force: true });
  });

  async function approveRun(thread: string, name: string): Promise<void> {
    const messages = await shepherd.waitForMessages(
      thread,
      (all) => cardsTitled(all, `: ${name}`).length > 0,
    );
    const card = cardsTitled(messages, `: ${name}`)[0] as PlaygroundMessage;
    const button = card.card?.actions?.find((action) => action.label === 'Approve');
    expect(button).toBeDefined();
    const result = await shepherd.click(thread, card.id, button?.actionId ?? '', 'bob');
    expect(result.status).toBe(200);
  }

  async function pushCard(thread: string, count: number): Promise<PlaygroundMessage> {
    const messages = await shepherd.waitForMessages(
      thread,
      (all) => cardsTitled(all, 'to the Hub?').length >= count,
    );
    return cardsTitled(messages, 'to the Hub?')[count - 1] as PlaygroundMessage;
  }

  async function approvePush(thread: string, card: PlaygroundMessage): Promise<void> {
    const approve = card.card?.actions?.find((action) => action.label === 'Approve push');
    expect(approve).toBeDefined();
    const result = await shepherd.click(thread, card.id, approve?.actionId ?? '', 'bob');
    expect(result.status).toBe(200);
  }

  it('evaluates after training (status evaluating) and posts a model-ready card with both values', async () => {
    const release = join(workspace, 'release-eval');
    // The agent looks the model and dataset up first: the revisions the Hub answered go on the launch record.
    llm.enqueue(
      {
        toolCalls: [
          { id: 'call_model_1', name: 'get_model_info', arguments: { model_id: 'Qwen/Qwen2.5-0.5B' } },
          { id: 'call_data_1', name: 'inspect_dataset', arguments: { dataset: 'openai/gsm8k' } },
          { id: 'call_search_1', name: 'search_models', arguments: { query: 'Llama-2' } },
        ],
      },
      { text: 'Looked them up.' },
    );
    threadId = await shepherd.mention('@shepherd look up Qwen/Qwen2.5-0.5B and openai/gsm8k');
    await shepherd.waitForMessages(threadId, (all) => botSaid(all, /Looked them up\./));
    await shepherd.reply(
      threadId,
      `@shepherd run --name tiny-sft --eval "python3 -u ${join(workspace, 'eval.py')} ${release}" -- python3 -u train.py`,
    );
    await approveRun(threadId, 'tiny-sft');
    runId = (await shepherd.app.features.runs.find('tiny-sft')).id;
    // Training exited 0 and the eval command waits for the release: the run is `evaluating`.
    await until(() => metaOf(shepherd.dataDir, runId).status === 'evaluating', 'status evaluating');
    await shepherd.waitForMessages(threadId, (all) =>
      botSaid(all, /tiny-sft: training finished; evaluating/),
    );
    writeFileSync(release, 'go');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Model ready: tiny-sft').length > 0,
      60_000,
    );
    const meta = metaOf(shepherd.dataDir, runId);
    expect(meta.status).toBe('completed');
    expect(meta.evaluation).toEqual({
      status: 'passed',
      exitCode: 0,
      results: { eval_loss: 0.25, eval_accuracy: 0.875, eval_bleu: 31.5 },
      startedAt: expect.any(String),
      endedAt: expect.any(String),
    });
    const card = cardsTitled(messages, 'Model ready: tiny-sft')[0]?.card;
    const field = (label: string) => card?.fields?.find((entry) => entry.label === label)?.value;
    expect(field('loss (final)')).toBe('0.95');
    expect(field('loss (best, min)')).toBe('0.8 at step 4');
    expect(field('Best checkpoint')).toBe('step 4');
    expect(field('GPU-hours')).toBe('0.00');
    expect(card?.text).toContain('eval_loss 0.25, eval_accuracy 0.875, eval_bleu 31.5');
    expect(card?.imageUrl).toBeDefined();
    expect(card?.actions?.map((action) => action.label)).toEqual(['Push to Hub', 'Fork', 'Compare']);
    // The model-ready card replaces the finished note: no "tiny-sft finished" card.
    expect(cardsTitled(messages, 'tiny-sft finished')).toHaveLength(0);
    await shepherd.reply(threadId, '@shepherd status tiny-sft --full');
    const full = await shepherd.waitForMessages(threadId, (all) => botSaid(all, /Reproducibility:/));
    const status = botMessages(full).find((message) => message.text.includes('Reproducibility:'))?.text;
    expect(status).toContain(
      `Model revision: Qwen/Qwen2.5-0.5B@${HUB_SHAS['Qwen/Qwen2.5-0.5B']} (resolved by get_model_info at `,
    );
    expect(status).toContain(
      `Dataset revision: openai/gsm8k@${HUB_SHAS['openai/gsm8k']} (resolved by inspect_dataset at `,
    );
    expect(status).not.toContain('Llama-2-7b-hf');
  }, 120_000);

  it('asks an approver before pushing, refuses a non-approver, uploads weights and a full model card', async () => {
    const messages = await shepherd.messages(threadId);
    const ready = cardsTitled(messages, 'Model ready: tiny-sft')[0] as PlaygroundMessage;
    const pushButton = ready.card?.actions?.find((action) => action.label === 'Push to Hub');
    const asked = await shepherd.click(threadId, ready.id, pushButton?.actionId ?? '', 'carol');
    expect(asked.status).toBe(200);
    const card = await pushCard(threadId, 1);
    const field = (label: string) => card.card?.fields?.find((entry) => entry.label === label)?.value;
    expect(field('Asked by')).toBe('carol');
    expect(field('Repo')).toBe('test-org/tiny-sft');
    expect(field('Visibility')).toBe('private');
    expect(field('Files')).toBe('3 + README.md, 128.0 KB');
    expect(card.card?.text).toContain('model.safetensors (128.0 KB)');

    const approve = card.card?.actions?.find((action) => action.label === 'Approve push');
    const refused = await shepherd.click(threadId, card.id, approve?.actionId ?? '', 'carol');
    expect(refused.status).toBe(403);
    expect(hub.repos.created.size).toBe(0);

    await approvePush(threadId, card);
    const after = await shepherd.waitForMessages(threadId, (all) =>
      botSaid(all, /📦 tiny-sft is on the Hub: http:\/\/127\.0\.0\.1:\d+\/test-org\/tiny-sft \(new repo/),
    );
    expect(hub.repos.created.get('test-org/tiny-sft')).toBe('private');
    expect(hub.requests.some((request) => request.path.startsWith('/lfs-upload/'))).toBe(true);
    const weights = readFileSync(join(hub.repos.root, 'test-org/tiny-sft/model.safetensors'));
    const pattern = Buffer.from(Array.from({ length: 256 }, (_, index) => index));
    expect(weights.equals(Buffer.concat(Array.from({ length: 512 }, () => pattern)))).toBe(true);
    expect(repoFile(hub.repos, 'test-org/tiny-sft', 'config.json')).toBe('{"model_type": "tiny"}');
    expect(repoFile(hub.repos, 'test-org/tiny-sft', 'tokenizer/vocab.txt')).toBe('a\nb\n');
    const readme = repoFile(hub.repos, 'test-org/tiny-sft', 'README.md');
    for (const part of [
      '---\nbase_model: Qwen/Qwen2.5-0.5B\ndatasets:\n- openai/gsm8k\nlibrary_name: transformers\nlicense: apache-2.0\ntags:\n- shepherd\n- sft\n---',
      '## Metrics',
      '| loss (final) | 0.95 |',
      '| loss (best, min) | 0.8 (step 4) |',
      '| eval_loss (eval) | 0.25 |',
      '| eval_accuracy (eval) | 0.875 |',
      '## Training configuration',
      '- Command: `python3 -u train.py`',
      '- GPUs: 0',
      'GPU-hours',
      '- Backend: ',
      `- Evaluation: \`python3 -u ${join(workspace, 'eval.py')}`,
      '## Provenance',
      `- Git commit: ${gitCommit} (clean)`,
      `- Shepherd run id: ${runId}`,
      '- Run requested by: alice',
      '- Push requested by: carol, approved by bob',
      `- Model revision: Qwen/Qwen2.5-0.5B@${HUB_SHAS['Qwen/Qwen2.5-0.5B']} (resolved by get_model_info at `,
      `- Dataset revision: openai/gsm8k@${HUB_SHAS['openai/gsm8k']} (resolved by inspect_dataset at `,
    ]) {
      expect(readme).toContain(part);
    }
    expect(readme).toMatch(/- Script sha256: [0-9a-f]{64}\n/);
    // Searched but not named by the run: not on its record.
    expect(readme).not.toContain('Llama-2-7b-hf');
    expect(readme).toMatch(/- Created: \S+; started: \S+; ended: \S+; pushed: \S+/);
    // The newest launch's record, as `status --full` shows it; `pip freeze` folded in a <details> block.
    for (const part of [
      '## Reproducibility',
      '- Launch 1 on ',
      '- Launch command: `python3 -u train.py`',
      '- Arguments: none',
      '- Seed: none passed',
      `- Git at launch: ${gitCommit} (clean)`,
      '- CUDA: ',
      '- Driver: ',
    ]) {
      expect(readme).toContain(part);
    }
    expect(readme).toMatch(/\n- Python: 3\.\d+\.\d+\n- torch: /);
    expect(readme).toMatch(
      /<details>\n<summary>pip freeze \(\d+ packages\)<\/summary>\n\n```text\n[\s\S]*```\n\n<\/details>/,
    );
    // The card is resolved with the outcome; `status` shows the URL.
    // The card's edit is its own post, which may land after the URL line: wait for it.
    const edited = await shepherd.waitForMessages(threadId, (all) =>
      all.some((message) => message.id === card.id && message.card?.resolved !== undefined),
    );
    const resolved = edited.find((message) => message.id === card.id);
    expect(resolved?.card?.resolved).toMatch(/^Approved by bob; pushed to http/);
    expect(after.some((message) => /Pushed tiny-sft to test-org\/tiny-sft: 100%/.test(message.text))).toBe(
      true,
    );
    await shepherd.reply(threadId, '@shepherd status tiny-sft');
    await shepherd.waitForMessages(threadId, (all) =>
      botSaid(all, /on the Hub: http:\/\/127\.0\.0\.1:\d+\/test-org\/tiny-sft \(commit [0-9a-f]{8}/),
    );
  }, 60_000);

  it('a second push (the command) makes a new commit in the same repo', async () => {
    await shepherd.reply(threadId, '@shepherd push tiny-sft');
    const card = await pushCard(threadId, 2);
    await approvePush(threadId, card);
    await shepherd.waitForMessages(threadId, (all) =>
      botSaid(all, /📦 tiny-sft is on the Hub: .*\(new commit/),
    );
    expect(hub.repos.commits.get('test-org/tiny-sft')).toHaveLength(2);
    expect(hub.requests.filter((request) => request.path === '/api/repos/create')).toHaveLength(2);
    expect(hub.repos.created.size).toBe(1);
  }, 60_000);

  it('the agent tool push_to_hub asks for the same approval and pushes', async () => {
    llm.enqueue(
      {
        toolCalls: [
          {
            id: 'call_push_1',
            name: 'push_to_hub',
            arguments: { run: 'tiny-sft', repo: 'test-org/tiny-sft-agent' },
          },
        ],
      },
      { text: 'I asked for the push; an approver has to approve it.' },
    );
    await shepherd.reply(threadId, '@shepherd please publish tiny-sft as test-org/tiny-sft-agent', 'alice');
    const card = await pushCard(threadId, 3);
    expect(card.card?.fields?.find((entry) => entry.label === 'Repo')?.value).toBe('test-org/tiny-sft-agent');
    expect(card.card?.fields?.find((entry) => entry.label === 'Asked by')?.value).toBe('alice');
    // The card is posted by the tool, before the turn sends the tool's result back to the model: wait for it.
    const toolResult = await until(
      () =>
        llm.requests
          .flatMap(
            (request) =>
              (request.body.messages as Array<{ role: string; tool_call_id?: string; content?: unknown }>) ??
              [],
          )
          .find((message) => message.role === 'tool' && message.tool_call_id === 'call_push_1'),
      'the push_to_hub result sent back to the model',
    );
    expect(String(toolResult?.content)).toMatch(/waiting for an approver/);
    await approvePush(threadId, card);
    await shepherd.waitForMessages(threadId, (all) =>
      botSaid(all, /📦 tiny-sft is on the Hub: .*\/test-org\/tiny-sft-agent \(new repo/),
    );
    expect(repoFile(hub.repos, 'test-org/tiny-sft-agent', 'README.md')).toContain(
      '- Push requested by: alice, approved by bob',
    );
  }, 60_000);

  it('a Hub error is posted in the thread and nothing is announced', async () => {
    await shepherd.reply(threadId, '@shepherd push tiny-sft --repo forbidden-org/tiny --public');
    const card = await pushCard(threadId, 4);
    expect(card.card?.fields?.find((entry) => entry.label === 'Visibility')?.value).toBe('public');
    await approvePush(threadId, card);
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      botSaid(
        all,
        /❌ Push of tiny-sft to forbidden-org\/tiny failed: the Hub answered 403: You don't have the rights/,
      ),
    );
    expect(botSaid(messages, /📦 .*forbidden-org/)).toBe(false);
    expect(existsSync(join(hub.repos.root, 'forbidden-org'))).toBe(false);
    // The card's edit is enqueued after the error line: wait for it.
    const edited = await shepherd.waitForMessages(threadId, (all) =>
      all.some((message) => message.id === card.id && message.card?.resolved !== undefined),
    );
    const resolved = edited.find((message) => message.id === card.id);
    expect(resolved?.card?.resolved).toMatch(/the push failed: the Hub answered 403/);
  }, 60_000);

  const buttonOf = (card: PlaygroundMessage | undefined, label: string) =>
    card?.card?.actions?.find((action) => action.label === label)?.actionId ?? '';

  it('Fork on the card: a form, the fork card with the diff, approved it resumes from the chosen step', async () => {
    const ready = cardsTitled(await shepherd.messages(threadId), 'Model ready: tiny-sft')[0];
    const fork = buttonOf(ready, 'Fork');
    // carol neither started tiny-sft nor approves: no form, and the click is refused.
    const refused = await shepherd.click(threadId, ready?.id ?? '', fork, 'carol', { openForm: true });
    expect(refused.status).toBe(403);
    expect(String(refused.body.error)).toBe(
      'Only alice (who started tiny-sft) or an approver can fork tiny-sft.',
    );
    const opened = await shepherd.click(threadId, ready?.id ?? '', fork, 'alice', { openForm: true });
    expect(opened.status).toBe(200);
    const form = opened.body.form as { fields: Array<{ id: string; initial?: string }> };
    // The default step is the best healthy checkpoint (the loss is best at step 4).
    expect(form.fields.map((field) => [field.id, field.initial])).toEqual([
      ['from_step', '4'],
      ['changes', undefined],
      ['name', 'tiny-sft-fork'],
      ['gpus', '0'],
    ]);
    // A bad value gets the command's sentence and no card.
    const bad = await shepherd.click(threadId, ready?.id ?? '', fork, 'alice', {
      values: { from_step: '3', changes: '', name: 'tiny-sft-bad', gpus: '0' },
    });
    expect(bad.status).toBe(200);
    await shepherd.waitForMessages(threadId, (all) =>
      botSaid(all, /^Fork: tiny-sft has no checkpoint at step 3; its checkpoints: steps 2, 4, 6$/),
    );
    expect(cardsTitled(await shepherd.messages(threadId), 'tiny-sft-bad')).toHaveLength(0);
    const submitted = await shepherd.click(threadId, ready?.id ?? '', fork, 'alice', {
      values: { from_step: '2', changes: ' lr=0.0005\nwarmup=10 ', name: 'tiny-sft-lr', gpus: '0' },
    });
    expect(submitted.status).toBe(200);
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, ': tiny-sft-lr').length > 0,
    );
    const card = cardsTitled(messages, ': tiny-sft-lr')[0];
    expect(card?.card?.text).toContain('fork of tiny-sft');
    expect(card?.card?.text).toContain('from the step-2 checkpoint (ckpt/step2)');
    expect(card?.card?.text).toContain(
      'Configuration changes from the parent run:\n```\n--lr: (unset) → 0.0005\n--warmup: (unset) → 10\n```',
    );
    await shepherd.waitForMessages(threadId, (all) =>
      botSaid(
        all,
        /Approval requested for fork tiny-sft-lr \(r-[\w-]+\) of tiny-sft from step 2: 0 GPUs, 2 changes/,
      ),
    );
    await approveRun(threadId, 'tiny-sft-lr');
    const forkId = (await shepherd.app.features.runs.find('tiny-sft-lr')).id;
    await until(() => metaOf(shepherd.dataDir, forkId).status === 'completed', 'the fork completed');
    const output = readFileSync(join(shepherd.dataDir, 'runs', forkId, 'output.log'), 'utf8');
    expect(output).toContain('resumed from step 2');
    expect(metricSteps(shepherd.dataDir, forkId)[0]).toBe(3);
  }, 90_000);

  it('Compare on the card: a fork against its parent; a first run asks for the other run', async () => {
    const forkCards = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Model ready: tiny-sft-lr').length > 0,
      60_000,
    );
    const forkReady = cardsTitled(forkCards, 'Model ready: tiny-sft-lr')[0];
    const refused = await shepherd.click(
      threadId,
      forkReady?.id ?? '',
      buttonOf(forkReady, 'Compare'),
      'carol',
    );
    expect(refused.status).toBe(403);
    // A fork has its parent to compare with: no form, the comparison comes at once.
    const clicked = await shepherd.click(
      threadId,
      forkReady?.id ?? '',
      buttonOf(forkReady, 'Compare'),
      'alice',
      {
        openForm: true,
      },
    );
    expect(clicked.status).toBe(200);
    expect(clicked.body.form).toBeUndefined();
    const compared = await shepherd.waitForMessages(threadId, (all) =>
      botSaid(all, /tiny-sft-lr is a fork of tiny-sft from step 2: aligned on step/),
    );
    const comparison = botMessages(compared).find((message) => message.text.startsWith('Comparison of loss'));
    // The fork logged steps 3 to 6 (4 points), its parent 1 to 6.
    expect(comparison?.text).toMatch(/tiny-sft-lr +completed +0\.9500 @6 +0\.8000 @4 +4\n/);
    expect(comparison?.text).toMatch(/tiny-sft +completed +0\.9500 @6 +0\.8000 @4 +6\n/);

    // tiny-sft is the first run of its thread and no fork: the form asks for the other run.
    const ready = cardsTitled(compared, 'Model ready: tiny-sft')[0];
    const opened = await shepherd.click(threadId, ready?.id ?? '', buttonOf(ready, 'Compare'), 'bob', {
      openForm: true,
    });
    expect(opened.status).toBe(200);
    expect((opened.body.form as { fields: Array<{ id: string }> }).fields.map((field) => field.id)).toEqual([
      'run',
    ]);
    const before = botMessages(compared).filter((message) =>
      message.text.startsWith('Comparison of loss'),
    ).length;
    const submitted = await shepherd.click(threadId, ready?.id ?? '', buttonOf(ready, 'Compare'), 'bob', {
      values: { run: 'tiny-sft-lr' },
    });
    expect(submitted.status).toBe(200);
    await shepherd.waitForMessages(
      threadId,
      (all) =>
        botMessages(all).filter((message) => message.text.startsWith('Comparison of loss')).length > before,
    );
  }, 90_000);

  it('a failed evaluation is reported like a crash, once, and the training result stays', async () => {
    const thread = await shepherd.mention(
      `run --name tiny-bad-eval --eval "python3 -u ${join(workspace, 'bad_eval.py')}" -- python3 -u train.py`,
    );
    await approveRun(thread, 'tiny-bad-eval');
    const messages = await shepherd.waitForMessages(
      thread,
      (all) => cardsTitled(all, 'tiny-bad-eval: evaluation failed').length > 0,
      60_000,
    );
    const id = (await shepherd.app.features.runs.find('tiny-bad-eval')).id;
    const meta = metaOf(shepherd.dataDir, id);
    expect(meta.status).toBe('completed');
    expect(meta.evaluation?.status).toBe('failed');
    const alert = cardsTitled(messages, 'tiny-bad-eval: evaluation failed')[0]?.card;
    expect(alert?.text).toContain('RuntimeError: eval exploded on purpose');
    expect(alert?.text).toContain('The training result and its checkpoints stay.');
    // The run still completed with its model: its model-ready card says the evaluation failed.
    const after = await shepherd.waitForMessages(
      thread,
      (all) => cardsTitled(all, 'Model ready: tiny-bad-eval').length > 0,
    );
    expect(cardsTitled(after, 'Model ready: tiny-bad-eval')[0]?.card?.text).toContain(
      'The evaluation failed',
    );
    expect(cardsTitled(after, 'evaluation failed')).toHaveLength(1);
  }, 120_000);
});
