import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/** Loss goes NaN at step 30, then the script ends by itself. */
const NAN_SCRIPT = `import math, time, shepherd
for step in range(1, 61):
    loss = float("nan") if step >= 30 else 2.0 / math.sqrt(step)
    shepherd.log_metrics(step=step, loss=loss)
    time.sleep(0.03)
shepherd.finish()
`;

/** One sample of a series from the Prometheus text, or 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (match?.[1] !== name) continue;
    const have = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((entry) => [entry[1], entry[2]]),
    );
    if (Object.entries(labels).every(([key, value]) => have[key] === value)) return Number(match[3]);
  }
  return 0;
}

describe('/metrics moves with activity', () => {
  let llm: ScriptedLlmServer;
  let workspace: string;
  let shepherd: TestApp;
  const scrape = async () => (await fetch(`${shepherd.url}/metrics`)).text();

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'All quiet.' } });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-ops-'));
    writeFileSync(join(workspace, 'nan.py'), NAN_SCRIPT);
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_LLM_MODEL: 'test-model',
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_MONITOR_INTERVAL_S: '0.25',
        SHEPHERD_APPROVERS: 'bob',
      },
    });
  });
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  it('serves the Prometheus text format with the default process metrics and every Shepherd series', async () => {
    const response = await fetch(`${shepherd.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const text = await response.text();
    expect(text).toContain('process_cpu_user_seconds_total');
    for (const series of [
      'shepherd_queue_jobs',
      'shepherd_turn_duration_seconds',
      'shepherd_turn_pickup_seconds',
      'shepherd_llm_calls_total',
      'shepherd_llm_tokens_total',
      'shepherd_llm_errors_total',
      'shepherd_alerts_total',
      'shepherd_runs',
      'shepherd_gpus',
      'shepherd_notify_total',
      'shepherd_approvals_total',
      'shepherd_event_loop_lag_seconds',
    ]) {
      expect(text, series).toContain(`# TYPE ${series} `);
    }
  });

  it('counts a turn, its LLM call and tokens, and the post it made', async () => {
    const before = await scrape();
    const threadId = await shepherd.mention('how are things?');
    await shepherd.waitForMessages(threadId, (all) => botMessages(all).some((m) => m.text === 'All quiet.'));
    // The turn job completes just after its answer is committed.
    let after = await scrape();
    for (
      let attempt = 0;
      attempt < 50 &&
      sample(after, 'shepherd_turn_duration_seconds_count') <=
        sample(before, 'shepherd_turn_duration_seconds_count');
      attempt += 1
    ) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      after = await scrape();
    }
    expect(sample(after, 'shepherd_turn_duration_seconds_count')).toBeGreaterThan(
      sample(before, 'shepherd_turn_duration_seconds_count'),
    );
    expect(sample(after, 'shepherd_turn_pickup_seconds_count')).toBeGreaterThan(
      sample(before, 'shepherd_turn_pickup_seconds_count'),
    );
    expect(sample(after, 'shepherd_llm_calls_total', { reason: 'turn' })).toBeGreaterThan(
      sample(before, 'shepherd_llm_calls_total', { reason: 'turn' }),
    );
    expect(
      sample(after, 'shepherd_llm_tokens_total', { direction: 'input', model: 'test-model' }),
    ).toBeGreaterThan(0);
    expect(sample(after, 'shepherd_notify_total', { platform: 'web', outcome: 'ok' })).toBeGreaterThan(
      sample(before, 'shepherd_notify_total', { platform: 'web', outcome: 'ok' }),
    );
  });

  it('counts an LLM failure by kind', async () => {
    llm.enqueue({ status: 500 });
    const before = await scrape();
    const threadId = await shepherd.mention('are you there?');
    await shepherd.waitForMessages(threadId, (all) => botMessages(all).length > 0);
    const after = await scrape();
    expect(sample(after, 'shepherd_llm_errors_total', { kind: 'server' })).toBe(
      sample(before, 'shepherd_llm_errors_total', { kind: 'server' }) + 1,
    );
  });

  it('counts a run, its approval and its NaN alert', async () => {
    const threadId = await shepherd.mention('run nan.py --gpus 0');
    const [card] = cardsTitled(
      await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'nan').length > 0),
      'nan',
    );
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);
    await shepherd.waitForMessages(
      threadId,
      (all) =>
        botMessages(all).some((m) => m.card?.actions?.some((action) => action.label === 'Acknowledge')),
      30_000,
    );
    // The counter moves once the alert is delivered, a moment after its card shows: wait for it.
    const text = await vi.waitFor(
      async () => {
        const scraped = await scrape();
        expect(sample(scraped, 'shepherd_alerts_total', { kind: 'nan' })).toBe(1);
        return scraped;
      },
      { timeout: 15_000, interval: 100 },
    );
    expect(sample(text, 'shepherd_approvals_total', { decision: 'approved' })).toBe(1);
    const runs = ['queued', 'running', 'completed', 'failed', 'stopped'].reduce(
      (total, status) => total + sample(text, 'shepherd_runs', { status }),
      0,
    );
    expect(runs).toBe(1);
    expect(
      sample(text, 'shepherd_queue_jobs', { queue: 'monitor', state: 'completed' }) +
        sample(text, 'shepherd_queue_jobs', { queue: 'control', state: 'completed' }),
    ).toBeGreaterThan(0);
  });
});
