import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimateCostUsd } from '../../src/runs/run-cost.js';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { deleteKeysWithPrefix, uniquePrefix } from '../helpers/redis.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { groupExists, waitFor } from '../runs/harness.js';

/** Trains forever; saves a checkpoint when asked to stop (as real scripts do). */
const FOREVER = `import time, shepherd
step = shepherd.resume_info()["step"] or 0
shepherd.on_stop(lambda: shepherd.save_checkpoint(step))
while True:
    step += 1
    shepherd.log_metrics(step=step, loss=1.0 / step)
    time.sleep(0.05)
`;

describe('max hours is enforced (issue 10 item 9)', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let workspace: string;
  let dataDir: string;
  let prefix: string;
  const environment = () => ({
    SHEPHERD_LLM_BASE_URL: llm.url,
    SHEPHERD_WORKSPACE: workspace,
    SHEPHERD_GPUS: '8',
    SHEPHERD_AUTO_APPROVE_USD: '1000',
    SHEPHERD_STOP_GRACE_S: '2',
    SHEPHERD_MONITOR_INTERVAL_S: '0.5',
  });

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'ok' } });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-limit-ws-'));
    dataDir = mkdtempSync(join(tmpdir(), 'shepherd-limit-data-'));
    prefix = uniquePrefix('limit');
    writeFileSync(join(workspace, 'forever.py'), FOREVER);
    shepherd = await startTestApp({ environment: environment(), prefix, dataDir, keepState: true });
  });
  afterAll(async () => {
    for (const run of await shepherd.app.features.runs.list()) {
      if (run.pgid !== undefined && groupExists(run.pgid)) process.kill(-run.pgid, 'SIGKILL');
    }
    await shepherd.stop();
    await llm.close();
    await deleteKeysWithPrefix(prefix);
    rmSync(workspace, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('stops an auto-approved 8-GPU run at its 4-second budget and tells the thread', async () => {
    const threadId = await shepherd.mention('run forever.py --gpus 8 --hours 0.0011 --name budget', 'alice');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => /stopped at its 4 s limit; resume to continue/.test(m.text)),
      30_000,
    );
    expect(botMessages(messages).some((m) => /auto-approved/.test(m.text))).toBe(true);
    const run = await shepherd.app.features.runs.find('budget');
    expect(run.status).toBe('paused');
    expect(run.statusReason).toBe('stopped at its 4 s limit');
    expect(groupExists(run.pgid ?? -1)).toBe(false);
    // It held its GPUs for its budget plus the grace period, not three times the budget.
    const status = JSON.parse(readFileSync(join(dataDir, 'runs', run.id, 'exit_status.json'), 'utf8')) as {
      ts: number;
      timeLimit: boolean;
    };
    expect(status.timeLimit).toBe(true);
    const heldS = status.ts - Date.parse(run.startedAt ?? '') / 1000;
    expect(heldS).toBeLessThan(4 + 2 + 2);
    expect(heldS).toBeGreaterThan(3.5);
    expect((await shepherd.app.features.runs.clusterInfo()).gpusFree).toBe(8);
    // The SIGTERM handler saved a checkpoint, so resuming continues from there.
    const resume = JSON.parse(readFileSync(join(dataDir, 'runs', run.id, 'resume.json'), 'utf8')) as {
      step: number;
    };
    expect(resume.step).toBeGreaterThan(10);
  });

  it('enforces the limit while the bot is down and reports it after the restart', async () => {
    const threadId = await shepherd.mention(
      'run forever.py --gpus 2 --hours 0.0015 --name downtime',
      'alice',
    );
    const run = await waitFor(async () => {
      const meta = await shepherd.app.features.runs.find('downtime').catch(() => undefined);
      return meta?.status === 'running' ? meta : undefined;
    });
    expect(run.deadlineAt).toBeDefined();
    await shepherd.stop();
    const exitStatus = join(dataDir, 'runs', run.id, 'exit_status.json');
    await waitFor(() => existsSync(exitStatus), 30_000, 'the launcher to end the run at its limit');
    expect(groupExists(run.pgid ?? -1)).toBe(false);
    shepherd = await startTestApp({ environment: environment(), prefix, dataDir, keepState: true });
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /downtime stopped at its 5 s limit; resume to continue/.test(m.text)),
    );
    expect(botMessages(messages).filter((m) => /stopped at its/.test(m.text))).toHaveLength(1);
    expect((await shepherd.app.features.runs.find(run.id)).status).toBe('paused');
  });

  it('refuses non-finite, non-positive and oversized hours before any card, from commands and the agent', async () => {
    const threadId = await shepherd.mention('run forever.py --gpus 1 --hours 500 --name too-long', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /above this deployment's limit of 168 h/.test(m.text)),
    );
    for (const hours of ['1e308', '1e400', 'nan', '-2', '0']) {
      await shepherd.reply(threadId, `@shepherd run forever.py --gpus 8 --hours ${hours}`, 'alice');
    }
    let messages = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).filter((m) => /hours/.test(m.text)).length >= 6,
    );
    llm.enqueue(
      {
        toolCalls: [
          {
            name: 'start_training',
            arguments: { name: 'agent-long', script: FOREVER, gpus: 8, max_hours: 400 },
          },
        ],
      },
      { text: 'That is longer than allowed.' },
    );
    await shepherd.reply(threadId, '@shepherd train forever for 400 hours on 8 GPUs', 'alice');
    messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => m.text.includes('longer than allowed')),
    );
    expect(JSON.stringify(llm.requests.at(-1)?.body)).toMatch(/SHEPHERD_MAX_HOURS/);
    expect(messages.some((m) => m.card !== undefined)).toBe(false);
    expect(messages.some((m) => /\$Infinity|NaN/.test(m.text))).toBe(false);
    const names = (await shepherd.app.features.runs.list()).map((meta) => meta.name);
    expect(names).not.toContain('too-long');
    expect(names).not.toContain('agent-long');
  });

  it('refuses to resume a run whose hours are above a lowered SHEPHERD_MAX_HOURS, before any card', async () => {
    const threadId = await shepherd.mention('run forever.py --gpus 1 --hours 100 --name long-one', 'alice');
    await waitFor(async () => {
      const meta = await shepherd.app.features.runs.find('long-one').catch(() => undefined);
      return meta?.status === 'running';
    });
    await shepherd.reply(threadId, '@shepherd pause long-one', 'alice');
    await waitFor(async () => (await shepherd.app.features.runs.find('long-one')).status === 'paused');
    await shepherd.stop();
    shepherd = await startTestApp({
      environment: { ...environment(), SHEPHERD_MAX_HOURS: '50' },
      prefix,
      dataDir,
      keepState: true,
    });
    const cardsBefore = (await shepherd.messages(threadId)).filter((m) => m.card !== undefined).length;
    await shepherd.reply(threadId, '@shepherd resume long-one', 'alice');
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /max hours 100 is above this deployment's limit of 50 h/.test(m.text)),
    );
    expect(messages.filter((m) => m.card !== undefined)).toHaveLength(cardsBefore);
    expect((await shepherd.app.features.runs.find('long-one')).status).toBe('paused');
  });

  it('never estimates an infinite or NaN cost', () => {
    expect(() => estimateCostUsd(8, Number.POSITIVE_INFINITY, 2.5)).toThrow(/bounded/);
    expect(() => estimateCostUsd(1e306, 168, 2.5)).toThrow(/bounded/);
    expect(() => estimateCostUsd(1, Number.NaN, 2.5)).toThrow(/bounded/);
    expect(estimateCostUsd(8, 2, 2.5)).toBe(40);
  });
});
