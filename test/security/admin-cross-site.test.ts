import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';

/*
 * The queue dashboard (/admin/queues) is served beside the playground with basic auth, which browsers
 * replay on their own: a page on another site must not be able to drive it with the admin's credentials.
 */
describe('the queue dashboard refuses other sites', () => {
  let shepherd: TestApp;
  const auth = `Basic ${Buffer.from('ops:admin-secret-0123').toString('base64')}`;
  beforeAll(async () => {
    shepherd = await startTestApp({ environment: { SHEPHERD_ADMIN_TOKEN: 'admin-secret-0123' } });
  });
  afterAll(() => shepherd.stop());

  it('refuses a foreign Origin or a cross-site fetch even with the credentials, and serves its own', async () => {
    for (const headers of [
      { origin: 'http://evil.example' },
      { origin: 'null' },
      { 'sec-fetch-site': 'cross-site' },
    ]) {
      const refused = await fetch(`${shepherd.url}/admin/queues/api/queues`, {
        headers: { authorization: auth, ...headers },
      });
      expect(refused.status, JSON.stringify(headers)).toBe(403);
    }
    const retry = await fetch(`${shepherd.url}/admin/queues/api/queues/turns/retry/failed`, {
      method: 'PUT',
      headers: { authorization: auth, origin: 'http://evil.example' },
    });
    expect(retry.status).toBe(403);
    const own = await fetch(`${shepherd.url}/admin/queues/api/queues`, {
      headers: { authorization: auth, origin: shepherd.url },
    });
    expect(own.status).toBe(200);
    const tool = await fetch(`${shepherd.url}/admin/queues/api/queues`, { headers: { authorization: auth } });
    expect(tool.status).toBe(200);
    // DNS rebinding: a name that resolves here but is not this server's is refused like on the API.
    const rebound = await new Promise<number>((resolve, reject) => {
      const target = new URL(`${shepherd.url}/admin/queues/api/queues`);
      const request = httpRequest(
        {
          host: target.hostname,
          port: target.port,
          path: target.pathname,
          headers: { host: 'attacker.example', authorization: auth },
        },
        (response) => {
          response.resume();
          resolve(response.statusCode ?? 0);
        },
      );
      request.on('error', reject);
      request.end();
    });
    expect(rebound).toBe(403);
  });
});
