import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled, fetchesPng } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

const curve = (scale: number) => `import time, shepherd
for step in range(1, 31):
    shepherd.log_metrics(step=step, loss=${scale} / step, acc=step / 30.0)
    time.sleep(0.05)
shepherd.finish()
`;
const FAILING = `import time, shepherd
shepherd.log_metrics(step=1, loss=1.0)
time.sleep(0.3)
raise SystemExit(2)
`;

function meta(shepherd: TestApp, name: string): Promise<RunMeta> {
  return shepherd.app.features.runs
    .find(name)
    .then(
      (found) =>
        JSON.parse(readFileSync(join(shepherd.dataDir, 'runs', found.id, 'meta.json'), 'utf8')) as RunMeta,
    );
}

/** GPU-hours of a finished single-launch run from its own start and end. */
async function gpuHours(shepherd: TestApp, name: string): Promise<number> {
  const run = await meta(shepherd, name);
  return (run.gpus * (Date.parse(run.endedAt as string) - Date.parse(run.startedAt as string))) / 3_600_000;
}

/** The value in `column` of the table row that starts with `key`. */
function cell(text: string, key: string, column: number): string | undefined {
  const row = text.split('\n').find((line) => line.startsWith(`${key} `));
  return row?.trim().split(/\s{2,}/)[column];
}

describe('compare, spend, the monthly budget and the daily digest (playground, real processes)', () => {
  let llm: ScriptedLlmServer;
  let workspace: string;
  let shepherd: TestApp;
  const lastBotText = async (threadId: string, test: (text: string) => boolean) => {
    const all = await shepherd.waitForMessages(
      threadId,
      (messages) => botMessages(messages).some((m) => test(m.text)),
      30_000,
    );
    return botMessages(all).find((m) => test(m.text))?.text as string;
  };
  const launchAndFinish = async (command: string, user: string, name: string, status: string) => {
    await shepherd.mention(command, user);
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const run = await meta(shepherd, name).catch(() => undefined);
      if (run?.status === status) return;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`${name} never became ${status}`);
  };

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'not json' } });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-spend-'));
    writeFileSync(join(workspace, 'a.py'), curve(1));
    writeFileSync(join(workspace, 'b.py'), curve(2));
    writeFileSync(join(workspace, 'fail.py'), FAILING);
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_GPUS: '4',
        SHEPHERD_GPU_HOUR_USD: '2.5',
        SHEPHERD_AUTO_APPROVE_USD: '100',
        SHEPHERD_BUDGET_USD_MONTH: '12',
        SHEPHERD_DIGEST_CHANNEL: 'web:digest',
        SHEPHERD_DIGEST_AT: '06:30',
        SHEPHERD_MONITOR_INTERVAL_S: '0.5',
      },
    });
    await launchAndFinish('run a.py --gpus 2 --hours 1 --name curve-a', 'alice', 'curve-a', 'completed');
    await launchAndFinish('run b.py --gpus 1 --hours 1 --name curve-b', 'bob', 'curve-b', 'completed');
    await launchAndFinish('run fail.py --gpus 1 --hours 1 --name broken', 'bob', 'broken', 'failed');
  }, 120_000);
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  it('compare: one overlay chart aligned on step and a table of final and best values', async () => {
    const threadId = await shepherd.mention('compare curve-a curve-b loss --steps 5..20', 'carol');
    const text = await lastBotText(threadId, (t) => t.startsWith('Comparison of loss'));
    expect(text).toContain('steps 5..20');
    // Final within the range is step 20; best of a falling loss is the same point.
    expect(cell(text, 'curve-a', 2)).toBe('0.05000 @20');
    expect(cell(text, 'curve-b', 2)).toBe('0.1000 @20');
    expect(cell(text, 'curve-a', 4)).toBe('16'); // points 5..20
    expect(text).toContain('Best: curve-a');
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      all.some((m) => (m.images?.length ?? 0) > 0),
    );
    const chart = messages.find((m) => (m.images?.length ?? 0) > 0);
    expect(chart?.text).toContain('loss of curve-a, curve-b, aligned on step');
    expect(await fetchesPng(shepherd.url, chart?.images?.[0])).toBe(true);

    // Higher is better for accuracy; a last word that is no run is the metric.
    const other = await shepherd.mention('compare curve-b curve-a acc', 'carol');
    const accuracy = await lastBotText(other, (t) => t.startsWith('Comparison of acc'));
    expect(accuracy).toContain('higher is better');
    expect(cell(accuracy, 'curve-a', 3)).toBe('1 @30');

    const bad = await shepherd.mention('compare curve-a nothing-here', 'carol');
    expect(await lastBotText(bad, (t) => t.includes('nothing-here'))).toMatch(/no run/i);
  }, 60_000);

  it('spend: GPU-hours and dollars by person and by channel from the runs’ real durations', async () => {
    const threadId = await shepherd.mention('spend --days 1', 'carol');
    const text = await lastBotText(threadId, (t) => t.startsWith('Spend over the last 1 day'));
    const alice = await gpuHours(shepherd, 'curve-a');
    const bob = (await gpuHours(shepherd, 'curve-b')) + (await gpuHours(shepherd, 'broken'));
    expect(cell(text, 'alice', 1)).toBe('1');
    expect(cell(text, 'bob', 1)).toBe('2');
    // Measured from the audit trail's running stretches: within 10% of start→end.
    expect(Number(cell(text, 'alice', 2))).toBeGreaterThan(alice * 0.9);
    expect(Number(cell(text, 'alice', 2))).toBeLessThan(alice * 1.1);
    expect(Number(cell(text, 'bob', 2))).toBeGreaterThan(bob * 0.9);
    expect(Number(cell(text, 'bob', 2))).toBeLessThan(bob * 1.1);
    expect(text).toMatch(/Monthly budget: \$0\.\d\d of \$12\.00 spent this month/);

    const byChannel = await shepherd.mention('spend --days 7 --by channel', 'carol');
    const channelText = await lastBotText(byChannel, (t) =>
      t.startsWith('Spend over the last 7 days by channel'),
    );
    expect(cell(channelText, 'web:ml-runs', 1)).toBe('3');

    const invalid = await shepherd.mention('spend --by team', 'carol');
    expect(await lastBotText(invalid, (t) => t.startsWith('`spend`'))).toContain('--by is person or channel');
  }, 60_000);

  it('a job that would pass the monthly budget needs an approver even under the auto-approval limit', async () => {
    const small = await shepherd.mention('run a.py --gpus 1 --hours 2 --name within-budget', 'carol');
    const smallCard = cardsTitled(
      await shepherd.waitForMessages(small, (all) => cardsTitled(all, 'Approve').length === 1),
      'Approve',
    )[0];
    expect(smallCard?.card?.resolved).toMatch(/^Auto-approved/);
    expect(smallCard?.card?.fields?.find((f) => f.label === 'Budget left')?.value).toMatch(
      /^\$1[12](\.\d\d)? of \$12 this month$/,
    );

    // $20 is under the $100 auto-approval limit but above what is left of the $12 budget.
    const big = await shepherd.mention('run a.py --gpus 4 --hours 2 --name over-budget', 'carol');
    const messages = await shepherd.waitForMessages(big, (all) => cardsTitled(all, 'Approve').length === 1);
    const card = cardsTitled(messages, 'Approve')[0]?.card;
    expect(card?.resolved).toBeUndefined();
    expect(card?.actions?.map((action) => action.label)).toEqual(['Approve', 'Reject', 'Edit']);
    expect(card?.text).toContain('would pass the monthly budget');
    expect(card?.fields?.find((f) => f.label === 'Est. cost')?.value).toBe('$20');
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await meta(shepherd, 'over-budget')).status).toBe('pending_approval');
  }, 60_000);

  it('posts the daily digest at SHEPHERD_DIGEST_AT from a BullMQ job scheduler (time injected)', async () => {
    const scheduler = await shepherd.app.features.controlQueue.getJobScheduler('daily-digest');
    expect(scheduler?.pattern).toBe('30 6 * * *');
    expect(scheduler?.tz).toBe('UTC');

    const digestTexts = async (): Promise<PlaygroundMessage[]> => {
      const response = await fetch(`${shepherd.url}/api/channels`);
      const body = (await response.json()) as {
        channels: Array<{ channel: string; threads: Array<{ threadId: string }> }>;
      };
      const threads = body.channels.find((entry) => entry.channel === 'digest')?.threads ?? [];
      const roots: PlaygroundMessage[] = [];
      for (const thread of threads) {
        const [root] = await shepherd.messages(`web:digest:${thread.threadId}`);
        if (root !== undefined) roots.push(root);
      }
      return roots;
    };
    const waitDigest = async (count: number) => {
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline) {
        const threads = await digestTexts();
        if (threads.length >= count) return threads;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      throw new Error('no digest posted');
    };
    const at = new Date(Date.now() + 60_000);
    await shepherd.app.features.controlQueue.add('digest', { v: 1, kind: 'digest', at: at.toISOString() });
    const [first] = await waitDigest(1);
    const text = first?.text ?? '';
    expect(text).toContain(`Daily digest for`);
    expect(text).toContain(`${at.toISOString().slice(0, 16).replace('T', ' ')} UTC`);
    expect(text).toMatch(/runs started: 4: (curve-a|curve-b|broken|within-budget)/);
    expect(text).toMatch(/runs finished: [23]: .*curve-a/);
    expect(text).toContain('runs failed: 1: broken');
    expect(cell(text, 'alice', 1)).toBe('1');
    expect(text).toContain('open approvals: 1');
    expect(text).toContain('over-budget (carol, 4 GPUs)');

    // Three days later, nothing of this happened in the last 24 hours.
    const later = new Date(Date.now() + 3 * 86_400_000);
    await shepherd.app.features.controlQueue.add('digest', { v: 1, kind: 'digest', at: later.toISOString() });
    const threads = await waitDigest(2);
    const second = threads.find((thread) =>
      thread.text.includes(later.toISOString().slice(0, 16).replace('T', ' ')),
    );
    expect(second?.text).toContain('runs started: 0');
    expect(second?.text).toContain('GPU time: none');
  }, 60_000);
});
