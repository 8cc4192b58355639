import { describe, expect, it } from 'vitest';
import { botMessages, startTestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';

describe('progress charts', () => {
  it('posts a chart of a running run every SHEPHERD_PROGRESS_EVERY_MIN, without anyone asking', async () => {
    const shepherd = await startTestApp({
      environment: {
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_MONITOR_INTERVAL_S: '0.25',
        SHEPHERD_PROGRESS_EVERY_MIN: '0.03',
        SHEPHERD_STOP_GRACE_S: '3',
      },
      overrides: { runEnvironment: { ...process.env, HEALTHY_STEPS: '120', HEALTHY_SLEEP: '0.05' } },
    });
    try {
      const threadId = await shepherd.mention(
        'run test/fixtures/healthy_train.py --gpus 0 --name progress',
        'alice',
      );
      const messages = await shepherd.waitForMessages(
        threadId,
        (all) => cardsTitled(all, 'progress').length > 0,
      );
      const card = cardsTitled(messages, 'progress')[0];
      await shepherd.click(threadId, card?.id ?? '', card?.card?.actions?.[0]?.actionId ?? '', 'bob');
      const charted = await shepherd.waitForMessages(
        threadId,
        (all) => botMessages(all).filter((message) => (message.images?.length ?? 0) > 0).length >= 2,
        20_000,
      );
      const charts = botMessages(charted).filter((message) => (message.images?.length ?? 0) > 0);
      // About one every 1.8 s while it runs: at least two, and not one per tick.
      expect(charts.length).toBeGreaterThanOrEqual(2);
      expect(charts.length).toBeLessThan(8);
    } finally {
      await shepherd.app.features.runs.service.stop('progress', 'system').catch(() => undefined);
      await shepherd.stop();
    }
  });
});
