import { spawnSync } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPlaygroundApp } from '../../src/bot/web/playground-app.js';
import { createWebAdapter, type WebAdapter } from '../../src/bot/web/web-adapter.js';
import { createWebStore } from '../../src/bot/web/web-store.js';
import { loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { createFakeHandlers, type FakeHandlers } from '../web/playground-fixture.js';

/*
 * Issue 10 items 1 and 2 at the HTTP level: Host, Origin and content type are checked for the API and the
 * SSE stream; an exposed playground needs a token; reserved names and their lookalikes are refused.
 */

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** node:http, because fetch will not send a chosen Host header. */
function raw(
  url: string,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<Raw> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: options.method ?? 'GET',
        path: options.path,
        headers: options.headers ?? {},
      },
      (response) => {
        // The SSE stream never ends: its status line and headers are the answer.
        if (String(response.headers['content-type']).startsWith('text/event-stream')) {
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body: '' });
          response.destroy();
          return;
        }
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        );
      },
    );
    request.on('error', reject);
    request.end(options.body);
  });
}

async function startWeb(
  playground?: { enabled: boolean; token: string | undefined; allowedHosts: readonly string[] },
  botName = 'shepherd',
) {
  const prefix = uniquePrefix('guard');
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  const handlers = createFakeHandlers();
  const store = createWebStore({ redis, prefix });
  const app = createPlaygroundApp({
    store,
    redis,
    host: '127.0.0.1',
    port: 0,
    botName,
    logger: createLogger('silent'),
    ...(playground === undefined ? {} : { playground }),
  });
  const adapter = createWebAdapter({ store, host: app });
  await adapter.start(handlers);
  return {
    adapter,
    handlers,
    url: app.address().url,
    async close() {
      await adapter.stop();
      await deleteKeysWithPrefix(prefix);
      redis.disconnect();
    },
  };
}

const json = { 'content-type': 'application/json' };
const message = (user: string, text = 'hello') => JSON.stringify({ channel: 'ml-runs', user, text });

describe('Host, Origin and content type', () => {
  let web: { adapter: WebAdapter; handlers: FakeHandlers; url: string; close(): Promise<void> };
  beforeAll(async () => {
    web = await startWeb();
  });
  afterAll(() => web.close());

  it('refuses a foreign Host (DNS rebinding) on the page, the API and the event stream', async () => {
    const port = new URL(web.url).port;
    for (const [method, path, body] of [
      ['GET', '/', undefined],
      ['GET', '/api/channels', undefined],
      ['GET', '/api/events', undefined],
      ['POST', '/api/messages', message('mallory')],
    ] as const) {
      const refused = await raw(web.url, {
        method,
        path,
        headers: { host: `attacker.example:${port}`, ...(body === undefined ? {} : json) },
        ...(body === undefined ? {} : { body }),
      });
      expect(refused.status, `${method} ${path}`).toBe(403);
    }
    expect(web.handlers.messages).toHaveLength(0);
    // Loopback names are the playground's own.
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) {
      expect((await raw(web.url, { path: '/api/channels', headers: { host } })).status, host).toBe(200);
    }
  });

  it('refuses a foreign Origin on the API and the event stream, and accepts its own', async () => {
    const origin = 'http://evil.example';
    const events = await raw(web.url, { path: '/api/events', headers: { origin } });
    expect(events.status).toBe(403);
    const posted = await raw(web.url, {
      method: 'POST',
      path: '/api/messages',
      headers: { origin, ...json },
      body: message('mallory'),
    });
    expect(posted.status).toBe(403);
    const nullOrigin = await raw(web.url, {
      method: 'POST',
      path: '/api/messages',
      headers: { origin: 'null', ...json },
      body: message('mallory'),
    });
    expect(nullOrigin.status).toBe(403);
    expect(web.handlers.messages).toHaveLength(0);
    const own = await raw(web.url, {
      method: 'POST',
      path: '/api/messages',
      headers: { origin: web.url, ...json },
      body: message('alice'),
    });
    expect(own.status).toBe(202);
  });

  it('answers a POST that is not application/json with 415', async () => {
    const before = web.handlers.messages.length;
    for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data']) {
      const refused = await raw(web.url, {
        method: 'POST',
        path: '/api/messages',
        headers: { 'content-type': contentType },
        body: message('alice'),
      });
      expect(refused.status, contentType).toBe(415);
    }
    const none = await raw(web.url, { method: 'POST', path: '/api/actions', body: '{}' });
    expect(none.status).toBe(415);
    expect(web.handlers.messages).toHaveLength(before);
    const charset = await raw(web.url, {
      method: 'POST',
      path: '/api/messages',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: message('alice'),
    });
    expect(charset.status).toBe(202);
  });
});

describe('playground user names', () => {
  let web: Awaited<ReturnType<typeof startWeb>>;
  beforeAll(async () => {
    web = await startWeb(undefined, 'herdbot');
  });
  afterAll(() => web.close());

  it('refuses the bot, "system" and lookalikes (NFKC, zero-width, bidi) for messages and clicks', async () => {
    const lookalikes = [
      'shepherd',
      'Shepherd',
      'SYSTEM',
      'herdbot',
      'ｓｈｅｐｈｅｒｄ',
      'shep\u200bherd',
      '\u202eshepherd\u202c',
      'sys\u2060tem',
      'herd\u200dbot',
      'shépherd',
    ];
    for (const user of lookalikes) {
      const posted = await raw(web.url, {
        method: 'POST',
        path: '/api/messages',
        headers: json,
        body: message(user),
      });
      expect(posted.status, JSON.stringify(user)).toBe(400);
      expect(posted.body).toMatch(/reserved|invisible/);
      const clicked = await raw(web.url, {
        method: 'POST',
        path: '/api/actions',
        headers: json,
        body: JSON.stringify({ threadId: 'm1', messageId: 'm1', actionId: 'approve:x', user }),
      });
      expect(clicked.status, JSON.stringify(user)).toBe(400);
    }
    expect(web.handlers.messages).toHaveLength(0);
    const fine = await raw(web.url, {
      method: 'POST',
      path: '/api/messages',
      headers: json,
      body: message('shepherdess'),
    });
    expect(fine.status).toBe(202);
  });

  it('refuses any name with a bidi override or a zero-width character (issue 26 §6)', async () => {
    // Each would show as another person's name ("bob", "alice") in the thread or on a card.
    const disguised = [
      'b\u202eob',
      'bo\u200bb',
      'alice\u200d',
      'ali\u2066ce\u2069',
      'b\ufeffob',
      'b\u00adob',
    ];
    const before = web.handlers.messages.length;
    for (const user of disguised) {
      const posted = await raw(web.url, {
        method: 'POST',
        path: '/api/messages',
        headers: json,
        body: message(user),
      });
      expect(posted.status, JSON.stringify(user)).toBe(400);
      expect(posted.body, JSON.stringify(user)).toContain('invisible or direction-changing');
      const clicked = await raw(web.url, {
        method: 'POST',
        path: '/api/actions',
        headers: json,
        body: JSON.stringify({ threadId: 'm1', messageId: 'm1', actionId: 'approve:x', user }),
      });
      expect(clicked.status, JSON.stringify(user)).toBe(400);
    }
    expect(web.handlers.messages).toHaveLength(before);
    // Names in other scripts and with accents stay welcome.
    for (const user of ['José', 'Zoë', '李雷', 'أحمد']) {
      const posted = await raw(web.url, {
        method: 'POST',
        path: '/api/messages',
        headers: json,
        body: message(user),
      });
      expect(posted.status, user).toBe(202);
    }
  });
});

describe('an exposed playground', () => {
  it('will not start on a non-loopback SHEPHERD_HOST without a token, in config and in a real process', () => {
    expect(() => loadConfig({ SHEPHERD_HOST: '0.0.0.0' })).toThrow(ConfigError);
    expect(() => loadConfig({ SHEPHERD_HOST: '0.0.0.0' })).toThrow(/SHEPHERD_PLAYGROUND_TOKEN/);
    expect(() => loadConfig({ SHEPHERD_HOST: '0.0.0.0', SHEPHERD_PLAYGROUND_TOKEN: 'short' })).toThrow(
      /at least 16/,
    );
    const token = 'a'.repeat(32);
    expect(loadConfig({ SHEPHERD_HOST: '0.0.0.0', SHEPHERD_PLAYGROUND_TOKEN: token }).playground.token).toBe(
      token,
    );
    expect(loadConfig({ SHEPHERD_HOST: '0.0.0.0', SHEPHERD_PLAYGROUND: 'off' }).playground.enabled).toBe(
      false,
    );
    expect(loadConfig({ SHEPHERD_HOST: 'localhost' }).playground.enabled).toBe(true);

    const started = spawnSync(process.execPath, ['--import', 'tsx', 'src/app/main.ts'], {
      cwd: process.cwd(),
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SHEPHERD_HOST: '0.0.0.0' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(started.status).toBe(2);
    expect(started.stderr).toMatch(
      /SHEPHERD_HOST=0\.0\.0\.0 exposes the web playground.*SHEPHERD_PLAYGROUND_TOKEN/,
    );
  });

  it('asks every request but /healthz for the token; ?token= trades it for a cookie', async () => {
    const token = 'tok-0123456789abcdef';
    const web = await startWeb({ enabled: true, token, allowedHosts: [] });
    try {
      expect((await raw(web.url, { path: '/healthz' })).status).toBe(200);
      expect((await raw(web.url, { path: '/' })).status).toBe(401);
      expect((await raw(web.url, { path: '/api/events' })).status).toBe(401);
      const anonymous = await raw(web.url, {
        method: 'POST',
        path: '/api/messages',
        headers: json,
        body: message('alice'),
      });
      expect(anonymous.status).toBe(401);
      const wrong = await raw(web.url, {
        method: 'POST',
        path: '/api/messages',
        headers: { ...json, authorization: 'Bearer tok-0123456789abcdeX' },
        body: message('alice'),
      });
      expect(wrong.status).toBe(401);
      expect(web.handlers.messages).toHaveLength(0);
      const bearer = await raw(web.url, {
        method: 'POST',
        path: '/api/messages',
        headers: { ...json, authorization: `Bearer ${token}` },
        body: message('alice'),
      });
      expect(bearer.status).toBe(202);

      expect((await raw(web.url, { path: '/?token=nope' })).status).toBe(401);
      const login = await raw(web.url, { path: `/?token=${token}` });
      expect(login.status).toBe(303);
      expect(login.headers.location).toBe('/');
      const cookie = String(login.headers['set-cookie']);
      expect(cookie).toMatch(/HttpOnly/);
      expect(cookie).toMatch(/SameSite=Strict/);
      const page = await raw(web.url, { path: '/', headers: { cookie: cookie.split(';')[0] ?? '' } });
      expect(page.status).toBe(200);
      expect(page.body).toContain('<html');
      const events = await raw(web.url, {
        path: '/api/events',
        headers: { cookie: cookie.split(';')[0] ?? '' },
      });
      expect(events.status).toBe(200);
    } finally {
      await web.close();
    }
  });

  it('SHEPHERD_PLAYGROUND=off leaves only /healthz', async () => {
    const web = await startWeb({ enabled: false, token: undefined, allowedHosts: [] });
    try {
      expect((await raw(web.url, { path: '/healthz' })).status).toBe(200);
      for (const path of ['/', '/api/channels', '/api/events']) {
        expect((await raw(web.url, { path })).status, path).toBe(404);
      }
      const posted = await raw(web.url, {
        method: 'POST',
        path: '/api/messages',
        headers: json,
        body: message('alice'),
      });
      expect(posted.status).toBe(404);
      expect(web.handlers.messages).toHaveLength(0);
    } finally {
      await web.close();
    }
  });

  it('answers to a name listed in SHEPHERD_ALLOWED_HOSTS', async () => {
    const web = await startWeb({ enabled: true, token: undefined, allowedHosts: ['shepherd.internal'] });
    try {
      const port = new URL(web.url).port;
      expect(
        (await raw(web.url, { path: '/api/channels', headers: { host: `shepherd.internal:${port}` } }))
          .status,
      ).toBe(200);
      expect(
        (await raw(web.url, { path: '/api/channels', headers: { host: `other.internal:${port}` } })).status,
      ).toBe(403);
    } finally {
      await web.close();
    }
  });
});
