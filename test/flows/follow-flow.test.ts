import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';
import type { RecordedRequest } from '../helpers/scripted-llm/index.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/** Logs steps until the gate file exists (so the test decides when it ends), then finishes or crashes. */
const gated = (gate: string, crash: boolean) => `import os, time, shepherd
step = 0
while not os.path.exists(${JSON.stringify(gate)}) or step < 40:
    step += 1
    if step <= 40:
        shepherd.log_metrics(step=step, loss=1.0 / step)
    time.sleep(0.05)
${crash ? 'raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")' : 'shepherd.finish()'}
`;

/** Waits for the gate at step 30, then a tenfold loss spike at step 60. */
const spiky = (gate: string) => `import math, os, time, shepherd
for step in range(1, 121):
    while step == 31 and not os.path.exists(${JSON.stringify(gate)}):
        time.sleep(0.05)
    loss = 3.0 / math.sqrt(1 + step / 10.0)
    if step == 60:
        loss *= 10
    shepherd.log_metrics(step=step, loss=loss)
    time.sleep(0.03)
shepherd.finish()
`;

/** A healthy run that keeps training until the gate file exists (the test opens it after 60 ticks). */
const steady = (gate: string) => `import math, os, time, shepherd
step = 0
while not os.path.exists(${JSON.stringify(gate)}) and step < 5000:
    step += 1
    shepherd.log_metrics(step=step, loss=3.0 / math.sqrt(1 + step / 10.0), lr=3e-4)
    time.sleep(0.04)
shepherd.finish()
`;

const isTriage = (request: RecordedRequest) => JSON.stringify(request.body).includes('training run doctor');
const followTurns = (llm: ScriptedLlmServer, run: string) =>
  llm.requests.filter((request) => request.lastUserText?.includes(`[follow] run ${run} `));

async function approve(shepherd: TestApp, threadId: string, titlePart: string): Promise<void> {
  const messages = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, titlePart).length > 0);
  const card = cardsTitled(messages, titlePart)[0];
  const button = card?.card?.actions?.find((action) => action.label === 'Approve');
  expect((await shepherd.click(threadId, card?.id ?? '', button?.actionId ?? '', 'bob')).status).toBe(200);
}

async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('follow_run: the thread hears back when a followed run ends', () => {
  let llm: ScriptedLlmServer;
  let workspace: string;
  let shepherd: TestApp;

  beforeAll(async () => {
    llm = await startScriptedOpenAi({
      fallback: (request) => {
        if (isTriage(request)) return { text: '{"decision": "WARNING", "diagnosis": "out of memory"}' };
        const last = request.lastUserText ?? '';
        const follow = /\[follow\] run (\S+)/.exec(last);
        if (follow !== null) return { text: `Follow-up for ${follow[1]}: on it.` };
        return { text: 'ok' };
      },
    });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-follow-'));
    writeFileSync(join(workspace, 'followed.py'), gated(join(workspace, 'followed.go'), false));
    writeFileSync(join(workspace, 'failing.py'), gated(join(workspace, 'failing.go'), true));
    writeFileSync(join(workspace, 'steady.py'), steady(join(workspace, 'steady.go')));
    writeFileSync(join(workspace, 'chain.py'), gated(join(workspace, 'chain.go'), false));
    writeFileSync(join(workspace, 'spiky.py'), spiky(join(workspace, 'spiky.go')));
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_MONITOR_INTERVAL_S: '0.1',
        SHEPHERD_APPROVERS: 'bob',
        SHEPHERD_STOP_GRACE_S: '3',
      },
    });
  });
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  it('fires once when the run finishes, while a run nobody follows costs no LLM call over 60 ticks', async () => {
    const threadId = await shepherd.mention('run followed.py --gpus 0 --name followed', 'alice');
    await approve(shepherd, threadId, 'followed');
    await waitFor(async () => (await shepherd.app.features.runs.find('followed')).status === 'running');

    llm.enqueue(
      {
        toolCalls: [
          {
            name: 'follow_run',
            arguments: {
              run: 'followed',
              events: ['finished', 'failed'],
              note: 'evaluate it on the test split',
            },
          },
        ],
      },
      { text: 'I will come back when followed finishes.' },
    );
    await shepherd.reply(threadId, "@shepherd when it's done, evaluate it on the test split", 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      all.some((m) => /come back when followed/.test(m.text)),
    );
    const toolResult = JSON.stringify(llm.requests.at(-1)?.body.messages);
    expect(toolResult).toMatch(/Following followed/);

    // A healthy run nobody follows, in the same app and meanwhile: monitored, and no LLM call at all.
    const requestsBefore = llm.requests.length;
    const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    const events = new QueueEvents('monitor', { connection: redis, prefix: shepherd.prefix });
    await events.waitUntilReady();
    const tickJobs: string[] = [];
    events.on('completed', ({ jobId }) => tickJobs.push(jobId));
    try {
      const steadyThread = await shepherd.mention('run steady.py --gpus 0 --name steady', 'carol');
      await approve(shepherd, steadyThread, 'steady');
      const steadyRun = await shepherd.app.features.runs.find('steady');
      const steadyTicks = () => tickJobs.filter((jobId) => jobId.includes(steadyRun.id)).length;
      // Counted in ticks the monitor really ran, not wall time: under load ticks come slower.
      await waitFor(() => steadyTicks() >= 60, 90_000);
      expect(
        botMessages(await shepherd.messages(steadyThread)).some((m) => /finished/.test(m.card?.title ?? '')),
      ).toBe(false);
      writeFileSync(join(workspace, 'steady.go'), '');
      await shepherd.waitForMessages(
        steadyThread,
        (all) => botMessages(all).some((m) => m.card?.title === 'steady finished'),
        60_000,
      );
      expect(steadyTicks()).toBeGreaterThanOrEqual(60);
    } finally {
      await events.close();
      redis.disconnect();
    }
    expect(llm.requests.length).toBe(requestsBefore);

    // Now the followed run finishes: one note, one turn, its answer in the thread.
    writeFileSync(join(workspace, 'followed.go'), '');
    await shepherd.waitForMessages(threadId, (all) => all.some((m) => /Follow-up for followed/.test(m.text)));
    const turns = followTurns(llm, 'followed');
    expect(turns).toHaveLength(1);
    expect(turns[0]?.lastUserText).toMatch(
      /^\[system\] \[follow\] run followed \(r-[^)]+\) finished at step 40, loss 0\.025; you asked: evaluate it on the test split$/,
    );
    expect(llm.requests.length).toBe(requestsBefore + 1);

    // The same ending seen again (a second poller, a restart's reconcile) fires nothing more.
    const meta = await shepherd.app.features.runs.find('followed');
    expect(meta.status).toBe('completed');
    await shepherd.app.features.follows.onRunEnded(meta);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(followTurns(llm, 'followed')).toHaveLength(1);
    expect(llm.requests.length).toBe(requestsBefore + 1);
    const session = await shepherd.post({
      channel: 'ml-runs',
      user: 'alice',
      text: '@shepherd session',
      threadId,
    });
    expect(session.status).toBe(202);
    await shepherd.waitForMessages(threadId, (all) =>
      all.some((m) =>
        /Follows:\n- followed \(r-[^)]+\) on finished, failed, asked by alice: "evaluate it on the test split"/.test(
          m.text,
        ),
      ),
    );
  }, 120_000);

  it('fires once when a followed run fails', async () => {
    const threadId = await shepherd.mention('run failing.py --gpus 0 --name failing', 'alice');
    await approve(shepherd, threadId, 'failing');
    await waitFor(async () => (await shepherd.app.features.runs.find('failing')).status === 'running');
    llm.enqueue(
      {
        toolCalls: [
          { name: 'follow_run', arguments: { run: 'failing', events: ['failed'], note: 'tell me why' } },
        ],
      },
      { text: 'Following failing.' },
    );
    await shepherd.reply(threadId, '@shepherd if it fails, tell me why', 'alice');
    await shepherd.waitForMessages(threadId, (all) => all.some((m) => m.text === 'Following failing.'));

    writeFileSync(join(workspace, 'failing.go'), '');
    await shepherd.waitForMessages(threadId, (all) => all.some((m) => /Follow-up for failing/.test(m.text)));
    // Give a duplicate (the crash alert, the triage) time to show up.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const turns = followTurns(llm, 'failing');
    expect(turns).toHaveLength(1);
    expect(turns[0]?.lastUserText).toMatch(
      /\[follow\] run failing \(r-[^)]+\) failed at step 40, loss 0\.025 \(exit 1[^)]*\)+; you asked: tell me why$/,
    );
  }, 90_000);

  it('fires once on an alert card for a run followed for alerts', async () => {
    const threadId = await shepherd.mention('run spiky.py --gpus 0 --name spiky', 'alice');
    await approve(shepherd, threadId, 'spiky');
    await waitFor(async () => (await shepherd.app.features.runs.find('spiky')).status === 'running');
    llm.enqueue(
      {
        toolCalls: [
          { name: 'follow_run', arguments: { run: 'spiky', events: ['alert'], note: 'look at the spike' } },
        ],
      },
      { text: 'Following spiky for alerts.' },
    );
    await shepherd.reply(threadId, '@shepherd tell me if anything looks off', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      all.some((m) => m.text === 'Following spiky for alerts.'),
    );

    writeFileSync(join(workspace, 'spiky.go'), '');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) =>
        all.some((m) => /Follow-up for spiky/.test(m.text)) &&
        botMessages(all).some((m) => m.card?.title === 'spiky finished'),
      60_000,
    );
    expect(
      botMessages(messages).filter((m) => m.card?.title !== undefined && /spike/i.test(m.card.title)),
    ).toHaveLength(1);
    const turns = followTurns(llm, 'spiky');
    expect(turns).toHaveLength(1);
    expect(turns[0]?.lastUserText).toMatch(
      /\[follow\] run spiky \(r-[^)]+\) raised an alert at step 60, loss [\d.]+: .*spike.*; you asked: look at the spike$/i,
    );
  }, 90_000);

  it('the follow turn can start the next step, which waits for approval like any launch', async () => {
    const threadId = await shepherd.mention('run chain.py --gpus 0 --name chain', 'alice');
    await approve(shepherd, threadId, 'chain');
    await waitFor(async () => (await shepherd.app.features.runs.find('chain')).status === 'running');
    llm.enqueue(
      {
        toolCalls: [
          { name: 'follow_run', arguments: { run: 'chain', events: ['finished'], note: 'launch the eval' } },
        ],
      },
      { text: 'Following chain.' },
    );
    await shepherd.reply(threadId, '@shepherd when chain is done, launch the eval', 'alice');
    await shepherd.waitForMessages(threadId, (all) => all.some((m) => m.text === 'Following chain.'));

    // The follow turn's answers: launch the eval, then say so.
    llm.enqueue(
      {
        toolCalls: [
          {
            name: 'start_training',
            arguments: { name: 'chain-eval', script: 'import shepherd\nshepherd.finish()\n', gpus: 0 },
          },
        ],
      },
      { text: 'chain finished; the eval chain-eval waits for approval.' },
    );
    writeFileSync(join(workspace, 'chain.go'), '');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) =>
        cardsTitled(all, 'chain-eval').length > 0 &&
        all.some((m) => m.text === 'chain finished; the eval chain-eval waits for approval.'),
    );
    const card = cardsTitled(messages, 'chain-eval')[0];
    expect(card?.card?.actions?.map((action) => action.label)).toEqual(
      expect.arrayContaining(['Approve', 'Reject']),
    );
    expect((await shepherd.app.features.runs.find('chain-eval')).status).toBe('pending_approval');
    expect(followTurns(llm, 'chain')).toHaveLength(2); // one turn: the tool round and the answer
  }, 90_000);
});
