import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { freePort, startOwnRedis, stopOwnRedis } from './redis-process.js';

async function readyz(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}/readyz`);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function waitForStatus(url: string, status: number, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  let last = await readyz(url);
  while (last.status !== status && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    last = await readyz(url);
  }
  return last;
}

describe('/healthz and /readyz', () => {
  let redis: ChildProcess;
  let port: number;
  let shepherd: TestApp;

  beforeAll(async () => {
    port = await freePort();
    redis = await startOwnRedis(port);
    shepherd = await startTestApp({ environment: { REDIS_URL: `redis://127.0.0.1:${port}` } });
  });
  afterAll(async () => {
    try {
      await shepherd.stop();
    } finally {
      await stopOwnRedis(redis);
    }
  });

  it('is ready when Redis, the workers and the playground are up, and names each check', async () => {
    const health = await fetch(`${shepherd.url}/healthz`);
    expect(health.status).toBe(200);
    const ready = await readyz(shepherd.url);
    expect(ready.status).toBe(200);
    const checks = ready.body.checks as Record<string, { ok: boolean }>;
    expect(checks.redis?.ok).toBe(true);
    expect(checks['worker:turns']?.ok).toBe(true);
    expect(checks['worker:notify']?.ok).toBe(true);
    expect(checks['adapter:web']?.ok).toBe(true);
  });

  it('goes 503 naming redis when Redis stops, and back to 200 when it returns', async () => {
    await stopOwnRedis(redis);
    const down = await waitForStatus(shepherd.url, 503);
    expect(down.status).toBe(503);
    expect(down.body.down).toContain('redis');
    // Liveness does not depend on Redis: the process is alive.
    expect((await fetch(`${shepherd.url}/healthz`)).status).toBe(200);

    redis = await startOwnRedis(port);
    const up = await waitForStatus(shepherd.url, 200, 30_000);
    expect(up.status).toBe(200);
    expect(up.body.down).toEqual([]);
  });
});
