import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpFetch } from '../../src/agent/providers/http-fetch.js';

/** A local server whose answers are chosen by path; it counts the sockets it was opened on. */
let server: http.Server;
let base = '';
let connections = 0;
const bodies: string[] = [];

beforeAll(async () => {
  server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      bodies.push(`${request.method} ${request.url} ${body}`);
      const path = request.url ?? '/';
      if (path === '/json') {
        response.writeHead(200, {
          'content-type': 'application/json',
          'x-seen': request.headers['x-test'] ?? '',
        });
        response.end(JSON.stringify({ echo: body }));
      } else if (path === '/gzip') {
        response.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' });
        response.end(gzipSync('squeezed text'));
      } else if (path === '/missing') {
        response.writeHead(404, { 'content-type': 'application/json' });
        response.end('{"error":{"message":"no such thing"}}');
      } else if (path === '/moved') {
        response.writeHead(303, { location: '/json' });
        response.end();
      } else if (path === '/slow') {
        setTimeout(() => response.end('late'), 5000).unref();
      } else if (path === '/v1/chat/completions') {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(
          JSON.stringify({
            id: 'c1',
            object: 'chat.completion',
            created: 1,
            model: 'm',
            choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'hello' } }],
          }),
        );
      } else {
        response.writeHead(500);
        response.end();
      }
    });
  });
  server.on('connection', () => {
    connections += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('createHttpFetch', () => {
  it('sends the body and headers, returns a real Response and reuses one socket', async () => {
    const fetch = createHttpFetch();
    const before = connections;
    for (let index = 0; index < 5; index++) {
      const response = await fetch(`${base}/json`, {
        method: 'post',
        headers: { 'content-type': 'application/json', 'x-test': `n${index}` },
        body: JSON.stringify({ index }),
      });
      expect(response).toBeInstanceOf(Response);
      expect(response.status).toBe(200);
      expect(response.headers.get('x-seen')).toBe(`n${index}`);
      expect(await response.json()).toEqual({ echo: JSON.stringify({ index }) });
    }
    expect(connections - before).toBe(1);
  });

  it('sends a Uint8Array body', async () => {
    const fetch = createHttpFetch();
    const response = await fetch(`${base}/json`, { method: 'PUT', body: new TextEncoder().encode('bytes') });
    expect(await response.json()).toEqual({ echo: 'bytes' });
  });

  it('decodes a gzip body and drops the encoding header', async () => {
    const response = await createHttpFetch()(`${base}/gzip`);
    expect(await response.text()).toBe('squeezed text');
    expect(response.headers.get('content-encoding')).toBeNull();
  });

  it('answers an error status as a response, not a rejection', async () => {
    const response = await createHttpFetch()(`${base}/missing`);
    expect(response.ok).toBe(false);
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ error: { message: 'no such thing' } });
  });

  it('follows a 303 as a GET without the body, as fetch does', async () => {
    bodies.length = 0;
    const response = await createHttpFetch()(`${base}/moved`, { method: 'POST', body: 'first' });
    expect(response.status).toBe(200);
    expect(response.url).toBe(`${base}/json`);
    expect(bodies).toEqual(['POST /moved first', 'GET /json ']);
  });

  it('rejects with the abort reason when the signal fires mid-request', async () => {
    const controller = new AbortController();
    const pending = createHttpFetch()(`${base}/slow`, { signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('hands a streamed body to the fallback', async () => {
    const seen: string[] = [];
    const fetch = createHttpFetch({
      fallback: async (input) => {
        seen.push(String(input));
        return new Response('from fallback');
      },
    });
    const stream = new ReadableStream({ start: (controller) => controller.close() });
    const response = await fetch(`${base}/json`, { method: 'POST', body: stream });
    expect(await response.text()).toBe('from fallback');
    expect(seen).toEqual([`${base}/json`]);
  });

  it('serves the OpenAI SDK as its fetch option', async () => {
    const client = new OpenAI({
      baseURL: `${base}/v1`,
      apiKey: 'k',
      fetch: createHttpFetch(),
      maxRetries: 0,
    });
    const completion = await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(completion.choices[0]?.message.content).toBe('hello');
  });

  it('rejects a refused connection as fetch does', async () => {
    await expect(createHttpFetch()('http://127.0.0.1:1/')).rejects.toThrow(TypeError);
  });
});
