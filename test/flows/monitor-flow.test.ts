import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled, fetchesPng, metricSteps } from '../helpers/flow.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

const STEADY = `import math, time, shepherd
for step in range(1, 451):
    shepherd.log_metrics(step=step, loss=3.0 / math.sqrt(1 + step / 10.0), lr=3e-4)
    time.sleep(0.04)
shepherd.finish()
`;

/** Crashes with a CUDA OOM at step 25 while BATCH > 16; checkpoints every 10 steps and resumes from them. */
const crashing = (batch: number, note = '') => `import json, time, shepherd
BATCH = ${batch}${note}
info = shepherd.resume_info()
start = (info["step"] or 0) + 1
shepherd.log("starting at step %d" % start)
def save(step):
    json.dump({"step": step}, open("ckpt.json", "w"))
    shepherd.save_checkpoint(step, "ckpt.json")
for step in range(start, 41):
    shepherd.log_metrics(step=step, loss=1.0 / step, batch=BATCH)
    if step % 10 == 0:
        save(step)
    if BATCH > 16 and step == 25:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)")
    time.sleep(0.02)
shepherd.finish()
`;

const SPIKE = `import math, time, shepherd
for step in range(1, 121):
    loss = 3.0 / math.sqrt(1 + step / 10.0)
    if step == 60:
        loss *= 10
    shepherd.log_metrics(step=step, loss=loss)
    time.sleep(0.03)
shepherd.finish()
`;

const fixAnswer = (script: string, diagnosis: string) => ({
  text: JSON.stringify({ decision: 'FIX', diagnosis, script }),
});

const cards = cardsTitled;

async function approveLatest(
  shepherd: TestApp,
  threadId: string,
  titlePart: string,
  count: number,
): Promise<void> {
  const messages = await shepherd.waitForMessages(
    threadId,
    (all) => cards(all, titlePart).length >= count,
    30_000,
  );
  const card = cards(messages, titlePart)[count - 1];
  const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
  const result = await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob');
  expect(result.status).toBe(200);
}

describe('monitoring in the thread', () => {
  let llm: ScriptedLlmServer;
  let workspace: string;
  let dataDir: string;
  let prefix: string;
  let shepherd: TestApp;
  const environment = () => ({
    SHEPHERD_LLM_BASE_URL: llm.url,
    SHEPHERD_WORKSPACE: workspace,
    SHEPHERD_DATA_DIR: dataDir,
    SHEPHERD_MONITOR_INTERVAL_S: '0.25',
    SHEPHERD_APPROVERS: 'bob',
    SHEPHERD_STOP_GRACE_S: '3',
  });

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'not json at all' } });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-workspace-'));
    dataDir = mkdtempSync(join(tmpdir(), 'shepherd-data-'));
    prefix = uniquePrefix('monitor-flow');
    writeFileSync(join(workspace, 'steady.py'), STEADY);
    writeFileSync(join(workspace, 'crashing.py'), crashing(64));
    writeFileSync(join(workspace, 'garbage.py'), crashing(64));
    writeFileSync(join(workspace, 'spiky.py'), SPIKE);
    shepherd = await startTestApp({ environment: environment(), prefix, dataDir, keepState: true });
  });
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    await deleteKeysWithPrefix(prefix);
    rmSync(workspace, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('stays quiet for a healthy run over 60+ ticks: no alert and zero LLM calls', async () => {
    const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    const events = new QueueEvents('monitor', { connection: redis, prefix });
    await events.waitUntilReady();
    let ticks = 0;
    events.on('completed', () => {
      ticks += 1;
    });
    try {
      const threadId = await shepherd.mention('run steady.py --gpus 0', 'alice');
      await approveLatest(shepherd, threadId, 'steady', 1);
      const messages = await shepherd.waitForMessages(
        threadId,
        (all) => botMessages(all).some((m) => m.card?.title === 'steady finished'),
        60_000,
      );
      expect(ticks).toBeGreaterThanOrEqual(60);
      const alertCards = botMessages(messages).filter((m) =>
        m.card?.actions?.some((action) => action.label === 'Acknowledge'),
      );
      expect(alertCards).toEqual([]);
      const llmCalls = await shepherd.app.ops.metrics.registry
        .getSingleMetric('shepherd_llm_calls_total')
        ?.get();
      expect(llmCalls?.values.reduce((sum, sample) => sum + sample.value, 0)).toBe(0);
      expect(llm.requests).toHaveLength(0);
    } finally {
      await events.close();
      redis.disconnect();
    }
  });

  it('alerts a loss spike once, with a chart, and records who acknowledged it', async () => {
    const threadId = await shepherd.mention('run spiky.py --gpus 0', 'alice');
    await approveLatest(shepherd, threadId, 'spiky', 1);
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.card?.title === 'spiky finished'),
      30_000,
    );
    const spikes = botMessages(messages).filter(
      (m) => m.card?.title !== undefined && /spike/i.test(m.card.title),
    );
    expect(spikes).toHaveLength(1);
    const spike = spikes[0];
    expect(await fetchesPng(shepherd.url, spike?.card?.imageUrl)).toBe(true);
    const ack = spike?.card?.actions?.find((action) => action.label === 'Acknowledge');
    expect((await shepherd.click(threadId, spike?.id ?? '', ack?.actionId ?? '', 'carol')).status).toBe(200);
    const after = await shepherd.waitForMessages(threadId, (all) =>
      /^Acknowledged by carol/.test(all.find((m) => m.id === spike?.id)?.card?.resolved ?? ''),
    );
    expect(after.find((m) => m.id === spike?.id)?.card?.actions).toBeUndefined();
    // No LLM for a spike unless someone asks.
    expect(llm.requests).toHaveLength(0);

    // A chart on demand, with a step range.
    await shepherd.reply(threadId, '@shepherd chart spiky loss --steps 50..70', 'carol');
    const charted = await shepherd.waitForMessages(threadId, (all) =>
      all.some((m) => (m.images?.length ?? 0) > 0),
    );
    expect(charted.some((m) => /Chart of loss for spiky \(21 points, steps 50\.\.70\)/.test(m.text))).toBe(
      true,
    );
  });

  it('never takes a garbage triage answer as a fix', async () => {
    llm.setHandler(() => ({ text: 'Sure! Here is a fix:\n```python\nprint("hello")\n```' }));
    const threadId = await shepherd.mention('run garbage.py --gpus 0', 'alice');
    await approveLatest(shepherd, threadId, 'garbage', 1);
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => /Triage of garbage/.test(m.text)),
      30_000,
    );
    const crash = botMessages(messages).find((m) => m.card?.title === 'garbage failed');
    expect(crash?.card?.text).toMatch(/CUDA out of memory/);
    expect(crash?.card?.fields).toEqual(
      expect.arrayContaining([
        { label: 'Class', value: 'cuda_oom' },
        { label: 'Last checkpoint', value: 'step 20' },
      ]),
    );
    expect(botMessages(messages).find((m) => /Triage of garbage/.test(m.text))?.text).toMatch(
      /could not be parsed/,
    );
    expect(cards(messages, 'Approve script change')).toHaveLength(0);
    const run = await shepherd.app.features.runs.find('garbage');
    expect(readFileSync(join(dataDir, 'runs', run.id, 'train.py'), 'utf8')).toBe(crashing(64));
    expect(llm.requests).toHaveLength(2); // one answer, one retry, nothing more
    llm.setHandler(undefined);
  });

  it('fixes a crash through approval, resumes from the checkpoint, and keeps the cap of 3 across a restart', async () => {
    // None of the three proposed fixes really fixes it (the batch stays above 16).
    const proposal = (fix: number) =>
      fixAnswer(
        crashing(32, `  # attempt ${fix}`),
        `CUDA OOM at batch 64; try a smaller batch (attempt ${fix})`,
      );
    // Answers are queued before the crash they answer, since a crash is triaged within a tick.
    llm.enqueue(proposal(1));
    const threadId = await shepherd.mention('run crashing.py --gpus 0', 'alice');
    await approveLatest(shepherd, threadId, 'crashing', 1);
    const run = await shepherd.app.features.runs.find('crashing');

    for (let fix = 1; fix <= 3; fix += 1) {
      if (fix < 3) llm.enqueue(proposal(fix + 1));
      await approveLatest(shepherd, threadId, 'Approve script change: crashing', fix);
      await shepherd.waitForMessages(
        threadId,
        (all) => botMessages(all).filter((m) => m.card?.title === 'crashing failed').length >= fix + 1,
        30_000,
      );
      expect(existsSync(join(dataDir, 'runs', run.id, `train_v${fix}.py`))).toBe(true);
      if (fix === 2) {
        // A bot restart in the middle: the fix counter lives in Redis.
        await shepherd.stop();
        shepherd = await startTestApp({ environment: environment(), prefix, dataDir, keepState: true });
      }
    }
    const requestsBefore = llm.requests.length;
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => /a person must look/.test(m.text)),
      30_000,
    );
    expect(cards(messages, 'Approve script change: crashing')).toHaveLength(3);
    expect(llm.requests.length).toBe(requestsBefore);
    // The fourth crash is refused, saying the count the Redis counter kept across the restart.
    expect(botMessages(messages).find((m) => /a person must look/.test(m.text))?.text).toMatch(
      /already proposed 3 fixes for this run \(the limit is 3\)/,
    );

    // A person fixes it for real (a teammate's script change): it resumes from step 21 and completes.
    const stepsBefore = metricSteps(dataDir, run.id).length;
    await shepherd.app.features.operations.updateScript(
      run.id,
      crashing(8),
      'halve the batch',
      { id: 'alice', name: 'alice' },
      run.threadId,
      'command',
    );
    await approveLatest(shepherd, threadId, 'Approve script change: crashing', 4);
    const finished = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.card?.title === 'crashing finished'),
      30_000,
    );
    expect(finished.length).toBeGreaterThan(0);
    const steps = metricSteps(dataDir, run.id);
    expect(steps[stepsBefore]).toBe(21);
    expect(steps.at(-1)).toBe(40);
    const deadline = Date.now() + 10_000;
    while ((await shepherd.app.features.runs.find(run.id)).status !== 'completed' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect((await shepherd.app.features.runs.find(run.id)).status).toBe('completed');
  }, 180_000);
});
