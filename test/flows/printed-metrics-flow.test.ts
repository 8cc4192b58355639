import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled, fetchesPng } from '../helpers/flow.js';
import { deleteKeysWithPrefix, uniquePrefix } from '../helpers/redis.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/*
 * A new user's first day: their Trainer-style script (it prints the Trainer's dicts and a tqdm bar and
 * never imports `shepherd`) goes NaN. On the old main it ran to the end with no alert and no chart.
 */

const fixtures = resolve('test/fixtures/printed');
/** trainer_style.py with its shared helper inlined: a run's script is one file. */
const TRAINER_STYLE = `${readFileSync(join(fixtures, 'printed_common.py'), 'utf8')}\n${readFileSync(
  join(fixtures, 'trainer_style.py'),
  'utf8',
).replace(/^from printed_common import .*$/m, '')}`;

describe('a script that only prints its metrics', () => {
  let llm: ScriptedLlmServer;
  let workspace: string;
  let prefix: string;
  let shepherd: TestApp;

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'not json at all' } });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-workspace-'));
    prefix = uniquePrefix('printed-flow');
    writeFileSync(join(workspace, 'hf_train.py'), TRAINER_STYLE);
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_MONITOR_INTERVAL_S: '0.25',
        SHEPHERD_APPROVERS: 'bob',
      },
      prefix,
    });
  });
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    await deleteKeysWithPrefix(prefix);
    rmSync(workspace, { recursive: true, force: true });
  });

  it('gets a NaN alert with a chart, and status and chart read the printed metrics', async () => {
    const threadId = await shepherd.mention('run hf_train.py --gpus 0', 'alice');
    const pending = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'hf-train').length > 0,
      30_000,
    );
    const card = cardsTitled(pending, 'hf-train')[0];
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);

    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.card?.title === 'hf-train finished'),
      60_000,
    );
    const alerts = botMessages(messages).filter((m) => /non-finite metric/.test(m.card?.title ?? ''));
    expect(alerts.map((m) => m.card?.title)).toEqual(['hf-train: non-finite metric at step 30']);
    expect(alerts[0]?.card?.title).toBe('hf-train: non-finite metric at step 30');
    expect(alerts[0]?.card?.text).toMatch(/loss became NaN/);
    expect(await fetchesPng(shepherd.url, alerts[0]?.card?.imageUrl)).toBe(true);

    await shepherd.reply(threadId, '@shepherd status hf-train', 'carol');
    const status = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /last metrics \(step \d+, read from output\.log\)/.test(m.text)),
    );
    expect(botMessages(status).some((m) => /train_runtime=/.test(m.text))).toBe(true);

    await shepherd.reply(threadId, '@shepherd chart hf-train loss', 'carol');
    const charted = await shepherd.waitForMessages(threadId, (all) =>
      all.some((m) => /Chart of loss for hf-train \(30 points\)/.test(m.text)),
    );
    expect(charted.some((m) => (m.images?.length ?? 0) > 0)).toBe(true);
  }, 120_000);

  it('posts one card when two ticks deliver the same incident at once', async () => {
    // The outbox is at-least-once: a tick that starts while another is still drawing the chart gets the
    // same incident. Without a claim both posted a card (seen here as a doubled NaN alert; main fixed it
    // the same way in parallel, this pins it for printed-metrics runs).
    const meta = await shepherd.app.features.runs.find('hf-train');
    const incident = {
      id: `${meta.id}:spike:loss#7`,
      runId: meta.id,
      kind: 'spike' as const,
      severity: 'warning' as const,
      title: 'hf-train: loss spike at step 20',
      summary: 'hf-train: loss spiked.',
      metrics: ['loss'],
      step: 20,
      at: Date.now(),
    };
    const { alerts } = shepherd.app.features;
    const outcomes = await Promise.allSettled([
      alerts.onIncident(incident, meta),
      alerts.onIncident(incident, meta),
    ]);
    expect(outcomes.map((outcome) => outcome.status).sort()).toEqual(['fulfilled', 'rejected']);
    const rejected = outcomes.find((outcome) => outcome.status === 'rejected');
    expect((rejected as PromiseRejectedResult).reason).toMatchObject({ code: 'delivery_in_progress' });
    // The retry on the next tick finds the card posted and posts nothing.
    await alerts.onIncident(incident, meta);
    const messages = await shepherd.messages(meta.threadId);
    expect(cardsTitled(messages, 'hf-train: loss spike at step 20')).toHaveLength(1);
  }, 60_000);
});
