import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { waitFor } from '../runs/harness.js';

/**
 * A real PyTorch run with a bad learning-rate schedule: the peak rate from step 25 blows the loss up
 * (Infinity at step 26, NaN after). It checkpoints every 10 steps and, like many real scripts, saves a
 * checkpoint when it gets SIGTERM — on NaN weights by then.
 */
const torchScript = (peakLr: string) => `import os, time, torch, shepherd
PEAK_LR = ${peakLr}
BASE_LR = 0.05
torch.manual_seed(0)
X = torch.randn(256, 16)
y = X @ torch.randn(16, 1)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=BASE_LR)
os.makedirs("ckpt", exist_ok=True)
info = shepherd.resume_info()
start = 1
if info["checkpoint"]:
    state = torch.load(info["checkpoint"])
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    start = info["step"] + 1
    shepherd.log("resumed from %s at step %d" % (info["checkpoint"], info["step"]))
step = start - 1
def save(at):
    path = "ckpt/step%d.pt" % at
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)
    shepherd.save_checkpoint(at, path)
shepherd.on_stop(lambda: save(step))
for step in range(start, 241):
    for group in opt.param_groups:
        group["lr"] = BASE_LR if step < 25 else PEAK_LR
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(X), y)
    loss.backward()
    opt.step()
    shepherd.log_metrics(step=step, loss=loss.item())
    if step % 10 == 0:
        save(step)
    time.sleep(0.05)
shepherd.finish()
`;

const nanCards = (messages: PlaygroundMessage[]) =>
  botMessages(messages).filter((m) => /non-finite metric/.test(m.card?.title ?? ''));

describe('the incident loop with a real PyTorch run (issue 10 item 12)', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let workspace: string;
  const nanPrompts: string[] = [];

  beforeAll(async () => {
    // Triage answers by what it is told: each NaN triage proposes the next learning rate.
    const fixes = ['1e10', '0.05'];
    llm = await startScriptedOpenAi({
      fallback: (request) => {
        const prompt = JSON.stringify(request.body);
        if (/Incident: nan/.test(prompt)) {
          nanPrompts.push(prompt);
          const peak = fixes[nanPrompts.length - 1] ?? '0.05';
          return {
            text: JSON.stringify({
              decision: 'FIX',
              diagnosis: `the peak learning rate blows the loss up; lower it to ${peak}`,
              script: torchScript(peak),
            }),
          };
        }
        return { text: JSON.stringify({ decision: 'WARNING', diagnosis: 'watching the loss' }) };
      },
    });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-torch-'));
    writeFileSync(join(workspace, 'nan_train.py'), torchScript('1e20'));
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_PYTHON: '/usr/bin/python3',
        SHEPHERD_MONITOR_INTERVAL_S: '0.25',
        SHEPHERD_APPROVERS: 'bob',
        SHEPHERD_STOP_GRACE_S: '20',
      },
    });
  });
  afterAll(async () => {
    for (const run of await shepherd.app.features.runs.list()) {
      if (run.status === 'running') await shepherd.app.features.runs.service.stop(run.id, 'system');
    }
    await shepherd.stop();
    await llm.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  async function approve(threadId: string, titlePart: string, count: number): Promise<PlaygroundMessage> {
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, titlePart).length >= count,
      90_000,
    );
    const card = cardsTitled(messages, titlePart)[count - 1];
    const action = card?.card?.actions?.find((item) => item.label === 'Approve');
    expect((await shepherd.click(threadId, card?.id ?? '', action?.actionId ?? '', 'bob')).status).toBe(200);
    return card as PlaygroundMessage;
  }

  it('resumes a fix from the last healthy checkpoint, alerts again while NaN persists, and ends with a finite loss', async () => {
    const threadId = await shepherd.mention('run nan_train.py --gpus 0 --name torch-nan', 'alice');
    await approve(threadId, 'Approve training run: torch-nan', 1);
    const run = await shepherd.app.features.runs.find('torch-nan');

    // First NaN: triage is told which detector fired, and the fix card names the checkpoint it uses.
    const first = await approve(threadId, 'Approve script change: torch-nan', 1);
    expect(nanPrompts[0]).toMatch(/Incident: nan/);
    expect(first.card?.text).toMatch(/resumes from the checkpoint at step 20 \(ckpt\/step20\.pt, saved/);
    expect(first.card?.text).toMatch(/before the NaN at step 26/);

    // Fix 1 does not fix it: the detectors re-armed, so the NaN alerts again and is triaged again.
    const second = await approve(threadId, 'Approve script change: torch-nan', 2);
    let messages = await shepherd.messages(threadId);
    const alerts = nanCards(messages);
    expect(alerts).toHaveLength(2);
    expect(alerts[1]?.card?.text).toMatch(/^still NaN after fix 1 of 3: /);
    expect(alerts[0]?.card?.text).not.toMatch(/after fix/);
    expect(nanPrompts).toHaveLength(2);
    expect(second.card?.text).toMatch(/resumes from the checkpoint at step 20 /);

    // Fix 2 works: the run completes from step 21 with a finite loss, and no further NaN alert.
    messages = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.card?.title === 'torch-nan finished'),
      120_000,
    );
    expect(nanCards(messages)).toHaveLength(2);
    const lines = readFileSync(join(shepherd.dataDir, 'runs', run.id, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n');
    const last = JSON.parse(lines.at(-1) ?? '{}') as { step: number; loss: number };
    expect(last.step).toBe(240);
    expect(Number.isFinite(last.loss)).toBe(true);
    expect(last.loss).toBeLessThan(0.01);
    // Every relaunch started right after the checkpoint at step 20, never after a NaN save.
    // (metrics.jsonl holds Python's NaN and Infinity, which JSON.parse refuses: read the steps only.)
    const steps = lines.map((line) => Number(/"step": (\d+)/.exec(line)?.[1]));
    const restarts = steps.filter((step, index) => index > 0 && step < (steps[index - 1] ?? 0));
    expect(restarts).toEqual([21, 21]);
    const output = readFileSync(join(shepherd.dataDir, 'runs', run.id, 'output.log'), 'utf8');
    // Both fixes resumed from the copy of ckpt/step20.pt pinned when the first fix was proposed.
    expect(
      output.match(/resumed from \S+\/\.shepherd\/pinned\/launch1-step20-\d+\/step20\.pt at step 20/g),
    ).toHaveLength(2);
    const history = await shepherd.app.features.runs.checkpoints.list(run.id);
    expect(history.find((entry) => entry.step === 20 && entry.launch === 1)?.health).toBe('ok');
    expect(
      history.filter((entry) => entry.launch === 1 && entry.step >= 30).every((e) => e.health === 'bad'),
    ).toBe(true);
    const completed = await waitFor(async () => {
      const meta = await shepherd.app.features.runs.find(run.id);
      return meta.status === 'completed' ? meta : undefined;
    });
    expect(completed.exitCode).toBe(0);
  }, 300_000);
});
