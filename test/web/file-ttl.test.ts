import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebStore } from '../../src/bot/web/web-store.js';
import { loadConfig } from '../../src/config/config.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

describe('SHEPHERD_FILE_TTL_DAYS', () => {
  const prefix = uniquePrefix('file-ttl');
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  });
  afterAll(async () => {
    await deleteKeysWithPrefix(prefix);
    redis.disconnect();
  });

  it('is read from the environment, 30 days by default, and must be positive', () => {
    expect(loadConfig({}).fileTtlDays).toBe(30);
    expect(loadConfig({ SHEPHERD_FILE_TTL_DAYS: '7' }).fileTtlDays).toBe(7);
    expect(() => loadConfig({ SHEPHERD_FILE_TTL_DAYS: '0' })).toThrow(/SHEPHERD_FILE_TTL_DAYS/);
  });

  it('gives stored files that lifetime, renewed by a new save', async () => {
    const store = createWebStore({ redis, prefix: `${prefix}:a` });
    const saved = await store.saveFile({ name: 'chart.png', contentType: 'image/png', data: PNG });
    const ttl = await redis.ttl(`${prefix}:a:web:file:${saved.id}`);
    expect(ttl).toBeGreaterThan(30 * 86400 - 60);
    expect(ttl).toBeLessThanOrEqual(30 * 86400);

    const shortStore = createWebStore({ redis, prefix: `${prefix}:b`, fileTtlDays: 2 });
    const short = await shortStore.saveFile({ name: 'chart.png', contentType: 'image/png', data: PNG });
    expect(await redis.ttl(`${prefix}:b:web:file:${short.id}`)).toBeLessThanOrEqual(2 * 86400);
  });

  it('forgets a file once it expired', async () => {
    // One second, so the test can watch it go.
    const store = createWebStore({ redis, prefix: `${prefix}:c`, fileTtlDays: 1 / 86400 });
    const saved = await store.saveFile({ name: 'chart.png', contentType: 'image/png', data: PNG });
    expect((await store.getFile(saved.id))?.data.equals(PNG)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 2100));
    expect(await store.getFile(saved.id)).toBeUndefined();
  });
});
