import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/app/app.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/logger.js';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('tokens guard /metrics and the queue dashboard', () => {
  let guarded: TestApp;
  let open: TestApp;

  beforeAll(async () => {
    guarded = await startTestApp({
      environment: { SHEPHERD_METRICS_TOKEN: 'metrics-secret', SHEPHERD_ADMIN_TOKEN: 'admin-secret' },
    });
    open = await startTestApp();
  });
  afterAll(async () => {
    await guarded.stop();
    await open.stop();
  });

  it('needs SHEPHERD_METRICS_TOKEN for /metrics when it is set', async () => {
    expect((await fetch(`${guarded.url}/metrics`)).status).toBe(401);
    const wrong = await fetch(`${guarded.url}/metrics`, { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
    const right = await fetch(`${guarded.url}/metrics`, {
      headers: { authorization: 'Bearer metrics-secret' },
    });
    expect(right.status).toBe(200);
    expect(await right.text()).toContain('shepherd_llm_calls_total');
    expect((await fetch(`${open.url}/metrics`)).status).toBe(200);
  });

  it('serves Bull Board for every queue only with SHEPHERD_ADMIN_TOKEN, by Bearer or basic auth', async () => {
    const denied = await fetch(`${guarded.url}/admin/queues`);
    expect(denied.status).toBe(401);
    expect(denied.headers.get('www-authenticate')).toContain('Basic');
    expect(
      (await fetch(`${guarded.url}/admin/queues`, { headers: { authorization: basic('ops', 'wrong') } }))
        .status,
    ).toBe(401);

    const page = await fetch(`${guarded.url}/admin/queues`, {
      headers: { authorization: basic('ops', 'admin-secret') },
    });
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/bull/i);
    const api = await fetch(`${guarded.url}/admin/queues/api/queues`, {
      headers: { authorization: 'Bearer admin-secret' },
    });
    expect(api.status).toBe(200);
    const body = (await api.json()) as { queues: Array<{ name: string }> };
    expect(body.queues.map((queue) => queue.name).sort()).toEqual(['control', 'monitor', 'notify', 'turns']);
  });

  it('has no dashboard when SHEPHERD_ADMIN_TOKEN is unset', async () => {
    expect((await fetch(`${open.url}/admin/queues`)).status).toBe(404);
    expect((await fetch(`${open.url}/admin/queues`, { headers: { authorization: 'Bearer x' } })).status).toBe(
      404,
    );
  });
});

describe('a worker-only process', () => {
  it('serves /healthz, /readyz and /metrics on SHEPHERD_PORT and nothing else', async () => {
    const prefix = uniquePrefix('ops-worker');
    const config = loadConfig({
      REDIS_URL: TEST_REDIS_URL,
      SHEPHERD_QUEUE_PREFIX: prefix,
      SHEPHERD_ROLE: 'worker',
      SHEPHERD_PORT: '0',
      SHEPHERD_LOG_LEVEL: 'silent',
    });
    const app = await createApp(config, createLogger('silent'));
    await app.start();
    try {
      const url = `http://127.0.0.1:${app.ops.port()}`;
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      const ready = await fetch(`${url}/readyz`);
      expect(ready.status).toBe(200);
      const checks = ((await ready.json()) as { checks: Record<string, unknown> }).checks;
      expect(Object.keys(checks)).toContain('worker:turns');
      expect(Object.keys(checks).some((name) => name.startsWith('adapter:'))).toBe(false);
      expect(await (await fetch(`${url}/metrics`)).text()).toContain('shepherd_turn_duration_seconds');
      expect((await fetch(`${url}/`)).status).toBe(404);
      expect((await fetch(`${url}/api/channels`)).status).toBe(404);
    } finally {
      await app.stop();
      await deleteKeysWithPrefix(prefix);
    }
  });
});
