import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sessionKeys } from '../../src/agent/session-store.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/logger.js';
import { ensureRedis } from '../../src/redis/embedded-redis.js';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { freePort } from '../helpers/free-port.js';
import { uniquePrefix } from '../helpers/redis.js';

/*
 * Issue 10 item 15: the Redis `npm start` starts for itself (nothing answers at REDIS_URL) keeps its data
 * across a restart of the bot and of that Redis. The test starts its own redis-server on a free port
 * through that very code path and ends only that process, by its pid.
 */
describe('the embedded Redis keeps threads, sessions and a pending approval across a restart', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-aof-'));
  const prefix = uniquePrefix('aof');
  const logger = createLogger('silent');
  let redis: Awaited<ReturnType<typeof ensureRedis>> | undefined;
  let shepherd: TestApp | undefined;

  afterAll(async () => {
    await shepherd?.stop().catch(() => undefined);
    await redis?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('restarts the bot and its redis-server and finds everything again', async () => {
    const url = `redis://127.0.0.1:${await freePort()}`;
    redis = await ensureRedis(loadConfig({ REDIS_URL: url, SHEPHERD_DATA_DIR: dataDir }), { logger });
    expect(redis.pid).toBeGreaterThan(0);
    const environment = {
      REDIS_URL: url,
      SHEPHERD_GPUS: '2',
      SHEPHERD_WORKSPACE: process.cwd(),
      SHEPHERD_APPROVERS: 'bob',
    };
    shepherd = await startTestApp({ environment, prefix, dataDir, keepState: true });
    // A plain command answers without the LLM, so the thread and its session are written by the bot itself.
    const threadId = await shepherd.mention(
      'run test/fixtures/healthy_train.py --gpus 1 --name kept',
      'alice',
    );
    const before = await shepherd.waitForMessages(
      threadId,
      (all) =>
        cardsTitled(all, 'kept').length > 0 &&
        all.some((message) => message.text.startsWith('Approval requested')),
    );
    const card = cardsTitled(before, 'kept')[0];
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect(approve).toBeDefined();
    const sessionKey = sessionKeys(prefix).history(`web:ml-runs:${threadId}`);
    await expect
      .poll(async () => (await shepherd?.app.redis.llen(sessionKey)) ?? 0, { timeout: 10_000 })
      .toBeGreaterThan(0);
    const sessionBefore = await shepherd.app.redis.lrange(sessionKey, 0, -1);
    // appendfsync everysec: give the last second its fsync before pulling the plug.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await shepherd.stop();
    shepherd = undefined;
    await redis.stop();
    redis = undefined;

    redis = await ensureRedis(loadConfig({ REDIS_URL: url, SHEPHERD_DATA_DIR: dataDir }), { logger });
    shepherd = await startTestApp({ environment, prefix, dataDir, keepState: true });
    const after = await shepherd.messages(threadId);
    expect(after.map((message) => message.text)).toEqual(before.map((message) => message.text));
    expect(await shepherd.app.redis.lrange(sessionKey, 0, -1)).toEqual(sessionBefore);
    expect((await shepherd.app.features.runs.find('kept')).status).toBe('pending_approval');
    expect(existsSync(join(dataDir, 'redis'))).toBe(true);
    expect(readdirSync(join(dataDir, 'redis')).some((name) => name.startsWith('appendonly'))).toBe(true);

    // The approval is still pending and still decides the run.
    const click = await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob');
    expect(click.status).toBe(200);
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => message.card?.resolved?.startsWith('Approved by bob') === true),
    );
    await expect
      .poll(async () => (await shepherd?.app.features.runs.find('kept'))?.status, {
        timeout: 20_000,
      })
      .toMatch(/queued|running|completed/);
    const run = await shepherd.app.features.runs.find('kept');
    if (run.status === 'running') await shepherd.app.features.runs.service.stop(run.id, 'system');
  }, 90_000);
});
