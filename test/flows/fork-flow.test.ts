import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled, metricSteps } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/*
 * Issue 23, "fork": a finished run that checkpointed every 10 steps is forked from step 20 with another
 * learning rate. The card lists the change against the parent; approved, the fork resumes from a copy of
 * the parent's step-20 checkpoint (a real Python process reading it), `status` shows the lineage and
 * `compare <fork>` lines it up with its parent. Bad requests get a sentence and no card.
 */

const TRAIN = `import json, os, sys, time, shepherd
lr = float(sys.argv[sys.argv.index("--lr") + 1])
run_dir = shepherd.run_dir()
info = shepherd.resume_info()
start = 1
if info["checkpoint"]:
    with open(os.path.join(run_dir, info["checkpoint"])) as handle:
        saved = json.load(handle)
    start = saved["step"] + 1
    print("resumed from step %d with lr %s (checkpoint lr %s)" % (saved["step"], lr, saved["lr"]), flush=True)
end = start + 39 if start == 1 else 60
for step in range(start, end + 1):
    shepherd.log_metrics(step=step, loss=1.0 / step)
    if step % 10 == 0:
        os.makedirs(os.path.join(run_dir, "ckpt"), exist_ok=True)
        path = os.path.join("ckpt", "step%d.json" % step)
        with open(os.path.join(run_dir, path), "w") as handle:
            json.dump({"step": step, "lr": lr}, handle)
        shepherd.save_checkpoint(step, path)
    time.sleep(0.02)
shepherd.finish()
`;

describe('fork <run>: a new run from a checkpoint of an old one', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let workspace: string;
  let threadId = '';

  async function approve(name: string): Promise<PlaygroundMessage> {
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, `: ${name}`).length > 0,
    );
    const card = cardsTitled(messages, `: ${name}`)[0] as PlaygroundMessage;
    const button = card.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card.id, button?.actionId ?? '', 'alice')).status).toBe(200);
    return card;
  }

  /** Sends a command and returns the bot's next message. */
  /** The answer to a command: the first plain bot message after it (a run's card may land meanwhile). */
  async function ask(text: string): Promise<string> {
    const before = botMessages(await shepherd.messages(threadId)).length;
    await shepherd.reply(threadId, `@shepherd ${text}`);
    const answerOf = (all: PlaygroundMessage[]) =>
      botMessages(all)
        .slice(before)
        .find((message) => message.card === undefined && message.text !== '');
    const messages = await shepherd.waitForMessages(threadId, (all) => answerOf(all) !== undefined);
    return answerOf(messages)?.text ?? '';
  }

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'ok' } });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-fork-ws-'));
    writeFileSync(join(workspace, 'train.py'), TRAIN);
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_PYTHON: '/usr/bin/python3',
        SHEPHERD_MONITOR_INTERVAL_S: '0.5',
      },
    });
  });

  afterAll(async () => {
    await shepherd?.stop();
    await llm?.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  it('runs the parent to the end, checkpointing every 10 steps', async () => {
    threadId = await shepherd.mention('run --name base -- /usr/bin/python3 -u train.py --lr 0.001');
    await approve('base');
    await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((message) => /base.*(completed|finished)/i.test(message.text)),
      60_000,
    );
    const parent = await shepherd.app.features.runs.find('base');
    expect(parent.status).toBe('completed');
    expect(metricSteps(shepherd.dataDir, parent.id).at(-1)).toBe(40);
  });

  it('refuses an unknown run, a step without a checkpoint and a bad --set, with no card', async () => {
    expect(await ask('fork nothing-here')).toMatch(/no run named nothing-here/);
    expect(await ask('fork base --from-step 15')).toBe(
      'base has no checkpoint at step 15; its checkpoints: steps 10, 20, 30, 40',
    );
    expect(await ask('fork base --set lr')).toBe('`fork`: --set takes key=value, got "lr"');
    expect(await ask('fork base --depth 3')).toMatch(/^`fork`: unknown option --depth/);
    const runs = await shepherd.app.features.runs.list();
    expect(runs.map((meta) => meta.name)).toEqual(['base']);
  });

  it('shows the configuration change on the card and, approved, resumes from the chosen step', async () => {
    await shepherd.reply(threadId, '@shepherd fork base --from-step 20 --set lr=0.0005 --name base-lr');
    const card = await approve('base-lr');
    expect(card.card?.text).toContain(
      'Configuration changes from the parent run:\n```\n--lr: 0.001 → 0.0005\n```',
    );
    expect(card.card?.text).toContain('fork of base');
    expect(card.card?.text).toContain('from the step-20 checkpoint (ckpt/step20.json)');
    expect(card.card?.text).toContain('Command:\n```\n/usr/bin/python3 -u train.py --lr 0.0005\n```');
    await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((message) => /base-lr.*(completed|finished)/i.test(message.text)),
      60_000,
    );
    const fork = await shepherd.app.features.runs.find('base-lr');
    const steps = metricSteps(shepherd.dataDir, fork.id);
    expect(steps[0]).toBe(21);
    expect(steps.at(-1)).toBe(60);
    const output = readFileSync(join(shepherd.dataDir, 'runs', fork.id, 'output.log'), 'utf8');
    expect(output).toContain('resumed from step 20 with lr 0.0005 (checkpoint lr 0.001)');
    expect(fork.forkOf).toEqual({
      runId: expect.any(String),
      runName: 'base',
      step: 20,
      checkpoint: 'ckpt/step20.json',
    });
  });

  it('status shows the lineage both ways', async () => {
    const parent = await shepherd.app.features.runs.find('base');
    const fork = await shepherd.app.features.runs.find('base-lr');
    expect(await ask('status base-lr')).toContain(
      `forked from: base (${parent.id}) at step 20 (ckpt/step20.json)`,
    );
    expect(await ask('status base')).toContain(`forks: base-lr (${fork.id}, from step 20)`);
  });

  it('compare <fork> lines it up with its parent', async () => {
    await shepherd.reply(threadId, '@shepherd compare base-lr');
    // The chart is posted too, in either order: wait for the table.
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => message.text.startsWith('Comparison of loss')),
    );
    const text =
      botMessages(messages).find((message) => message.text.startsWith('Comparison of loss'))?.text ?? '';
    expect(text).toContain('base-lr is a fork of base from step 20');
    // The fork's points are steps 21..60, the parent's 1..40: one chart, one step axis.
    expect(text).toMatch(/base-lr\s+completed\s+0\.01667 @60/);
    expect(text).toMatch(/\nbase\s+completed\s+0\.02500 @40/);
  });

  it('without --from-step forks from the newest healthy checkpoint', async () => {
    await shepherd.reply(threadId, '@shepherd fork base --name base-again');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, ': base-again').length > 0,
    );
    const card = cardsTitled(messages, ': base-again')[0];
    expect(card?.card?.text).toContain('from the step-40 checkpoint (ckpt/step40.json)');
    expect(card?.card?.text).toContain('Configuration: unchanged from the parent run.');
  });
});
