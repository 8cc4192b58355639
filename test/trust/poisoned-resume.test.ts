import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { waitFor } from '../runs/harness.js';

/**
 * Issue 22, "a resume point that cannot be poisoned": the careless single-file story. The script keeps
 * one `ckpt.pt`, rewritten in place (like `torch.save(state, "ckpt.pt")`) every 20 steps while the loss
 * improves, and again from its SIGTERM handler with whatever state it has then. The loss becomes
 * Infinity at step 70, so the fix card names the checkpoint at step 60; the stop for the fix rewrites
 * `ckpt.pt` with the poisoned weights. The checkpoint file holds its own step, so the relaunch shows
 * which state it really loaded, whatever resume.json says.
 */
const story = (blowUpAt: string) => `import json, time, shepherd
BLOW_UP_AT = ${blowUpAt}
LAST = 400
info = shepherd.resume_info()
state = {"step": 0, "w": 3.0, "best": None}
if info["checkpoint"]:
    with open(info["checkpoint"]) as handle:
        state = json.load(handle)
    shepherd.log("resumed from step %d (file %s; resume.json says step %s)" % (state["step"], info["checkpoint"], info["step"]))
else:
    shepherd.log("starting from scratch")
def save():
    with open("ckpt.pt", "w") as handle:
        json.dump(state, handle)
    shepherd.save_checkpoint(state["step"], "ckpt.pt")
shepherd.on_stop(save)
while state["step"] < LAST:
    state["step"] += 1
    step = state["step"]
    if BLOW_UP_AT is not None and step >= BLOW_UP_AT:
        state["w"] = state["w"] * 1e300 * 1e300
    else:
        state["w"] *= 0.98
    loss = state["w"] * state["w"] + 0.01
    shepherd.log_metrics(step=step, loss=loss)
    if step % 20 == 0 and (state["best"] is None or loss < state["best"]):
        state["best"] = loss
        save()
    # The broken run crawls on after the blow-up, so the fix reaches it before it ends even on a busy CI.
    time.sleep(0.03 if BLOW_UP_AT is None or step < BLOW_UP_AT else 0.1)
shepherd.finish()
`;

const nanCards = (messages: PlaygroundMessage[]) =>
  botMessages(messages).filter((m) => /non-finite metric/.test(m.card?.title ?? ''));

/** Steps the first launch's SIGTERM handler saved to ckpt.pt (after the blow-up): the poisoned saves. */
const stopSaves = (runDir: string) =>
  readFileSync(join(runDir, 'checkpoints.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { step: number; launch: number; checkpoint: string })
    .filter((entry) => entry.launch === 1 && entry.step > 70 && entry.checkpoint === 'ckpt.pt')
    .map((entry) => entry.step);

/** The first line the relaunched script logged about where it started. */
const startLine = (output: string, after: number) =>
  /resumed from step \d+ \(file [^)]*\)|starting from scratch/.exec(output.slice(after))?.[0];

describe('a fix resumes from the chosen checkpoint even when the stop overwrites it (issue 22)', () => {
  let llm: ScriptedLlmServer | undefined;
  let shepherd: TestApp | undefined;
  let workspace: string | undefined;

  afterEach(async () => {
    for (const run of (await shepherd?.app.features.runs.list()) ?? []) {
      if (run.status === 'running') await shepherd?.app.features.runs.service.stop(run.id, 'system');
    }
    await shepherd?.stop();
    await llm?.close();
    if (workspace !== undefined) rmSync(workspace, { recursive: true, force: true });
  });

  async function start(environment: Record<string, string> = {}): Promise<TestApp> {
    llm = await startScriptedOpenAi({
      fallback: (request) =>
        /Incident: nan/.test(JSON.stringify(request.body))
          ? {
              text: JSON.stringify({
                decision: 'FIX',
                diagnosis: 'the weights blow up at step 70; remove the blow-up',
                script: story('None'),
              }),
            }
          : { text: JSON.stringify({ decision: 'WARNING', diagnosis: 'watching the loss' }) },
    });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-poison-'));
    writeFileSync(join(workspace, 'story.py'), story('70'));
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_PYTHON: '/usr/bin/python3',
        SHEPHERD_MONITOR_INTERVAL_S: '0.25',
        SHEPHERD_APPROVERS: 'bob',
        SHEPHERD_STOP_GRACE_S: '20',
        ...environment,
      },
    });
    return shepherd;
  }

  async function approve(app: TestApp, threadId: string, titlePart: string): Promise<PlaygroundMessage> {
    const messages = await app.waitForMessages(
      threadId,
      (all) => cardsTitled(all, titlePart).length >= 1,
      60_000,
    );
    const card = cardsTitled(messages, titlePart)[0];
    const action = card?.card?.actions?.find((item) => item.label === 'Approve');
    expect((await app.click(threadId, card?.id ?? '', action?.actionId ?? '', 'bob')).status).toBe(200);
    return card as PlaygroundMessage;
  }

  /** Runs the story up to the approved fix; returns what the relaunch logged and the thread. */
  async function runStory(app: TestApp, name: string) {
    const threadId = await app.mention(`run story.py --gpus 0 --name ${name}`, 'alice');
    await approve(app, threadId, `Approve training run: ${name}`);
    const run = await app.app.features.runs.find(name);
    const runDir = join(app.dataDir, 'runs', run.id);
    const card = await approve(app, threadId, `Approve script change: ${name}`);
    const before = readFileSync(join(runDir, 'output.log'), 'utf8').length;
    const line = await waitFor(
      async () => startLine(readFileSync(join(runDir, 'output.log'), 'utf8'), before),
      30_000,
    );
    return { threadId, run, runDir, card, line };
  }

  /** The run finishes with a finite loss, after exactly one NaN alert; returns the relaunch's first step. */
  async function expectFinishedOnce(app: TestApp, threadId: string, runId: string, runDir: string) {
    const messages = await app.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => /finished$/.test(m.card?.title ?? '')),
      60_000,
    );
    expect(nanCards(messages)).toHaveLength(1);
    const lines = readFileSync(join(runDir, 'metrics.jsonl'), 'utf8').trim().split('\n');
    expect(lines.at(-1)).toMatch(/"step": 400, "loss": 0\.01\d*\}/);
    const steps = lines.map((line) => Number(/"step": (\d+)/.exec(line)?.[1]));
    const restarts = steps.filter((step, index) => index > 0 && step < (steps[index - 1] ?? 0));
    const completed = await waitFor(async () => {
      const meta = await app.app.features.runs.find(runId);
      return meta.status === 'completed' ? meta : undefined;
    });
    expect(completed.exitCode).toBe(0);
    return { messages, restarts };
  }

  it('resumes from a pinned copy of the step-60 checkpoint, not the NaN state the SIGTERM handler saved', async () => {
    const app = await start();
    const { threadId, run, runDir, card, line } = await runStory(app, 'poisoned');
    // The relaunch loaded the state of step 60, from the pinned copy, while ckpt.pt holds the NaN state.
    expect(line).toMatch(/^resumed from step 60 \(file .*\/\.shepherd\/pinned\/[^/]+\/ckpt\.pt;/);
    expect(card.card?.text).toMatch(/resumes from the checkpoint at step 60 \(ckpt\.pt, saved/);
    expect(card.card?.text).toMatch(/pinned a copy/);
    expect(stopSaves(runDir)).not.toEqual([]);

    const { messages, restarts } = await expectFinishedOnce(app, threadId, run.id, runDir);
    expect(restarts).toEqual([61]);
    expect(botMessages(messages).map((m) => m.text)).toContainEqual(
      expect.stringMatching(
        /is running on CPU \(script v2\); it resumes from the step-60 checkpoint \(pinned by Shepherd before the stop: \.shepherd\/pinned\//,
      ),
    );
    // The pinned copy is removed once the run has ended.
    await waitFor(async () => (existsSync(join(runDir, '.shepherd', 'pinned')) ? undefined : true));
  }, 180_000);

  it('without a pinned copy (over SHEPHERD_PIN_MAX_GB) notices the overwrite after the stop and starts over', async () => {
    const app = await start({ SHEPHERD_PIN_MAX_GB: '0.000000001' });
    const { threadId, run, runDir, card, line } = await runStory(app, 'unpinned');
    expect(line).toBe('starting from scratch');
    expect(stopSaves(runDir)).not.toEqual([]);
    expect(card.card?.text).toMatch(/resumes from the checkpoint at step 60 \(ckpt\.pt, saved/);
    expect(card.card?.text).toMatch(/not pinned: it is \d+ bytes, over SHEPHERD_PIN_MAX_GB/);
    const { messages, restarts } = await expectFinishedOnce(app, threadId, run.id, runDir);
    expect(restarts).toEqual([1]);
    expect(botMessages(messages).map((m) => m.text)).toContainEqual(
      expect.stringMatching(
        /the step-60 checkpoint was overwritten while the run stopped; restarting from scratch/,
      ),
    );
  }, 180_000);
});
