import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled, metricSteps } from '../helpers/flow.js';
import { ensureRunUser, RUN_USER } from '../helpers/run-user.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { untilEvery } from '../helpers/until.js';

/*
 * The CPU pre-flight (SHEPHERD_PREFLIGHT_STEPS): before a card, the script runs a few steps with no
 * GPUs; the card shows the steps, time and loss, or the traceback — and Approve stays available.
 */

const until = untilEvery({ timeoutMs: 30_000, intervalMs: 100 });

/** "pre-flight: " or, as root with a run user, "pre-flight (as shepherd-runner, no network): ". */
const PREFLIGHT = String.raw`pre-flight(?: \([^)]*\))?`;

const approveAction = (message: PlaygroundMessage | undefined) =>
  message?.card?.actions?.find((action) => action.label === 'Approve')?.actionId ?? '';

describe('CPU pre-flight before the approval card (playground)', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  // As root a pre-flight needs a run user (it is refused otherwise: preflight-isolation.test.ts); the
  // approved runs then start as that user too, so the data directory must be open to it.
  const asRoot = ensureRunUser() === undefined;
  const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-pf-data-'));

  beforeAll(async () => {
    chmodSync(dataDir, 0o755);
    llm = await startScriptedOpenAi();
    shepherd = await startTestApp({
      dataDir,
      environment: {
        ...(asRoot ? { SHEPHERD_RUN_AS_USER: RUN_USER } : {}),
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_GPUS: '2',
        SHEPHERD_PREFLIGHT_STEPS: '5',
        SHEPHERD_PREFLIGHT_TIMEOUT_S: '3',
        SHEPHERD_STOP_GRACE_S: '3',
      },
      overrides: { runEnvironment: { ...process.env, HEALTHY_STEPS: '400', HEALTHY_SLEEP: '0.05' } },
    });
  });
  afterAll(async () => {
    for (const run of await shepherd.app.features.runs.list()) {
      if (run.status === 'running' || run.status === 'queued') {
        await shepherd.app.features.runs.service.stop(run.id, 'system').catch(() => undefined);
      }
    }
    await shepherd.stop();
    await llm.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a passing pre-flight shows steps, time and loss on the card, and touches nothing of the run', async () => {
    const threadId = await shepherd.mention(
      'run test/fixtures/healthy_train.py --gpus 1 --name pf-ok',
      'alice',
    );
    const messages = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'pf-ok').length > 0);
    const card = cardsTitled(messages, 'pf-ok')[0];
    expect(card?.card?.text).toMatch(
      new RegExp(String.raw`^${PREFLIGHT}: 5 steps in \d+ s, loss 2\.00 → 1\.66$`, 'm'),
    );
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some(
        (m) => m.text === 'Running a short CPU pre-flight of pf-ok before the approval card…',
      ),
    );
    const run = await shepherd.app.features.runs.find('pf-ok');
    expect(run.status).toBe('pending_approval');
    // The pre-flight ran in a scratch directory: the run has no metrics until it is approved.
    expect(metricSteps(shepherd.dataDir, run.id)).toEqual([]);

    // A script change proposed by the agent is pre-flighted too.
    llm.enqueue(
      {
        toolCalls: [
          {
            name: 'edit_script',
            arguments: { run: 'pf-ok', edits: [{ old: 'lr=1e-3', new: 'lr=5e-4' }], reason: 'lower lr' },
          },
        ],
      },
      { text: 'proposed' },
    );
    await shepherd.reply(threadId, '@shepherd lower the lr', 'alice');
    const after = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Approve script change: pf-ok').length > 0,
    );
    expect(cardsTitled(after, 'Approve script change: pf-ok')[0]?.card?.text).toMatch(
      new RegExp(String.raw`^${PREFLIGHT}: 5 steps in \d+ s, loss 2\.00 → 1\.66$`, 'm'),
    );
  });

  it('a failing pre-flight shows the traceback, keeps Approve, and the approved GPU run still works', async () => {
    const threadId = await shepherd.mention(
      'run test/fixtures/gpu_only_train.py --gpus 1 --name pf-gpu',
      'alice',
    );
    const messages = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'pf-gpu').length > 0);
    const card = cardsTitled(messages, 'pf-gpu')[0];
    const text = card?.card?.text ?? '';
    expect(text).toMatch(
      /pre-flight FAILED on CPU(?: \([^)]*\))?: the script exited with code 1 after 2 steps \(\d+ s\)/,
    );
    expect(text).toContain('Traceback (most recent call last):');
    expect(text).toContain('RuntimeError: CUDA is required but no GPU is visible');
    expect(card?.card?.actions?.map((action) => action.label)).toEqual(['Approve', 'Reject', 'Edit']);

    expect((await shepherd.click(threadId, card?.id ?? '', approveAction(card), 'bob')).status).toBe(200);
    const done = await until(async () => {
      const meta = await shepherd.app.features.runs.find('pf-gpu');
      return meta.status === 'completed' || meta.status === 'failed' ? meta : undefined;
    }, 'pf-gpu ended');
    // On its GPU (CUDA_VISIBLE_DEVICES=0 here) the script runs to the end.
    expect(done.status).toBe('completed');
    expect(metricSteps(shepherd.dataDir, done.id)).toEqual([1, 2, 3]);
  });

  it('a pre-flight that does not reach its steps in time is stopped and reported', async () => {
    const threadId = await shepherd.mention(
      'run test/fixtures/hang_train.py --gpus 1 --name pf-slow',
      'alice',
    );
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'pf-slow').length > 0,
      30_000,
    );
    const text = cardsTitled(messages, 'pf-slow')[0]?.card?.text ?? '';
    expect(text).toMatch(
      /pre-flight FAILED on CPU(?: \([^)]*\))?: the script did not reach 5 steps within 3 s after 1 step \(3 s\)/,
    );
    expect(cardsTitled(messages, 'pf-slow')[0]?.card?.actions?.map((action) => action.label)).toEqual([
      'Approve',
      'Reject',
      'Edit',
    ]);
  });
});
