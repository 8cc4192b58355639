import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { metricSteps } from '../helpers/flow.js';
import { deleteKeysWithPrefix, uniquePrefix } from '../helpers/redis.js';

const HEALTHY = `import time, shepherd
lr = shepherd.config()["lr"]
for step in range(1, 61):
    shepherd.log_metrics(step=step, loss=1.0 / (1 + lr * step))
    time.sleep(0.05)
shepherd.finish()
`;

describe('a sweep survives a bot restart (state in Redis, driven by run-schedule)', () => {
  const prefix = uniquePrefix('sweep-restart');
  const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-sweep-restart-'));
  const workspace = mkdtempSync(join(tmpdir(), 'shepherd-sweep-ws-'));
  writeFileSync(join(workspace, 'healthy.py'), HEALTHY);
  const environment = {
    SHEPHERD_WORKSPACE: workspace,
    SHEPHERD_GPUS: '2',
    SHEPHERD_AUTO_APPROVE_USD: '100',
    SHEPHERD_MONITOR_INTERVAL_S: '0.5',
    SHEPHERD_LLM_BASE_URL: 'http://127.0.0.1:9/v1',
  };
  let second: TestApp | undefined;
  afterAll(async () => {
    await second?.stop();
    await deleteKeysWithPrefix(prefix);
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(workspace, { recursive: true, force: true });
  });

  it('carries on after the bot was down while the canary ran: the rest start and the leaderboard is posted', async () => {
    const first = await startTestApp({ environment, prefix, dataDir, keepState: true });
    const threadId = await first.mention(
      'sweep healthy.py --grid lr=0.5,2 --gpus 1 --hours 1 --name survive --canary-steps 30 --parallel 1',
    );
    await first.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => m.text.includes('auto-approved')),
    );
    const canary = await first.app.features.runs.find('survive-1');
    const deadline = Date.now() + 30_000;
    while (metricSteps(dataDir, canary.id).length < 3 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 100));
    await first.stop();
    // The canary keeps running while the bot is down; the next bot picks the sweep up from Redis.
    second = await startTestApp({ environment, prefix, dataDir, keepState: true });
    const done = await second.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.text.includes('🏁')),
      60_000,
    );
    const texts = botMessages(done).map((m) => m.text);
    expect(texts.filter((text) => text.includes('canary survive-1 logged'))).toHaveLength(1);
    const board = texts.find((text) => text.includes('🏁')) as string;
    expect(board).toContain('Sweep survive: completed');
    expect(board.indexOf('survive-2 ')).toBeLessThan(board.indexOf('survive-1 '));
    expect((await second.app.features.runs.find('survive-2')).status).toBe('completed');
    expect(texts.filter((text) => text.includes('🏁'))).toHaveLength(1);
  }, 120_000);
});
