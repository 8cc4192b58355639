import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The wire-level core shared by the scripted OpenAI and Anthropic servers: a real HTTP server on an
 * ephemeral port that records every request and answers with the next scripted step.
 */

export interface ScriptedToolCall {
  name: string;
  /** An object is sent as JSON; a string is sent verbatim (so tests can send invalid JSON). */
  arguments: object | string;
  id?: string;
}

/** Token counts the reply reports (default 10 in, 5 out). */
export interface ScriptedUsage {
  inputTokens: number;
  outputTokens: number;
}

export type Step =
  | { text: string; toolCalls?: ScriptedToolCall[]; usage?: ScriptedUsage }
  | { toolCalls: ScriptedToolCall[]; text?: string; usage?: ScriptedUsage }
  | { status: number; body?: unknown; headers?: Record<string, string> }
  | { delayMs: number; then: Step }
  | { hang: true };

export interface RecordedRequest {
  path: string;
  /** Parsed JSON body. */
  body: Record<string, unknown>;
  headers: IncomingMessage['headers'];
  /** Arrival time, `Date.now()` milliseconds. */
  receivedAt: number;
  stream: boolean;
  /** The text of the last user message that has text (tool-result-only messages are skipped). */
  lastUserText: string | undefined;
}

export type StepHandler = (request: RecordedRequest) => Step | Promise<Step>;

export interface ScriptedServerOptions {
  /** Used when the queue is empty and no handler is set. Default: `{ text: 'ok' }`. */
  fallback?: Step | StepHandler;
}

export interface ScriptedLlmServer {
  /** The base URL to give the SDK, e.g. `http://127.0.0.1:PORT/v1`. */
  url: string;
  port: number;
  requests: RecordedRequest[];
  enqueue(...steps: Step[]): void;
  setHandler(handler: StepHandler | undefined): void;
  close(): Promise<void>;
}

export interface WireFormat {
  /** Path this server answers, e.g. `/v1/chat/completions`. */
  path: string;
  lastUserText(body: Record<string, unknown>): string | undefined;
  /** Write a scripted reply (text and/or tool calls), streaming or not. */
  writeReply(response: ServerResponse, body: Record<string, unknown>, step: ReplyStep, stream: boolean): void;
  errorBody(status: number): unknown;
}

export type ReplyStep = { text?: string; toolCalls?: ScriptedToolCall[]; usage?: ScriptedUsage };

let idCounter = 0;
export function nextId(prefix: string): string {
  idCounter += 1;
  return `${prefix}_${Date.now().toString(36)}${idCounter}`;
}

export function argumentsText(call: ScriptedToolCall): string {
  return typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments);
}

/** Split text into a few chunks so streaming clients really reassemble deltas. */
export function chunks(text: string, size = 8): string[] {
  const parts: string[] = [];
  for (let index = 0; index < text.length; index += size) parts.push(text.slice(index, index + size));
  return parts;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of request) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

export async function startScriptedServer(
  format: WireFormat,
  options: ScriptedServerOptions = {},
): Promise<ScriptedLlmServer> {
  const queue: Step[] = [];
  const requests: RecordedRequest[] = [];
  let handler: StepHandler | undefined;
  const fallback = options.fallback ?? { text: 'ok' };

  const pickStep = async (recorded: RecordedRequest): Promise<Step> => {
    const queued = queue.shift();
    if (queued !== undefined) return queued;
    if (handler !== undefined) return handler(recorded);
    return typeof fallback === 'function' ? fallback(recorded) : fallback;
  };

  const answer = async (
    response: ServerResponse,
    body: Record<string, unknown>,
    step: Step,
    stream: boolean,
  ): Promise<void> => {
    if ('hang' in step) return; // never answer: the client's timeout must fire
    if ('delayMs' in step) {
      await new Promise((resolve) => setTimeout(resolve, step.delayMs));
      if (response.destroyed) return;
      await answer(response, body, step.then, stream);
      return;
    }
    if ('status' in step) {
      response.writeHead(step.status, { 'content-type': 'application/json', ...step.headers });
      response.end(JSON.stringify(step.body ?? format.errorBody(step.status)));
      return;
    }
    format.writeReply(response, body, step, stream);
  };

  const server = createServer((request, response) => {
    void (async () => {
      const path = (request.url ?? '/').split('?')[0] ?? '/';
      if (request.method !== 'POST' || path !== format.path) {
        response.writeHead(404, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { message: `no route ${request.method} ${path}` } }));
        return;
      }
      const raw = await readBody(request);
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(raw) as Record<string, unknown>;
      } catch {
        response.writeHead(400, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { message: 'body is not JSON' } }));
        return;
      }
      const stream = body.stream === true;
      const recorded: RecordedRequest = {
        path,
        body,
        headers: request.headers,
        receivedAt: Date.now(),
        stream,
        lastUserText: format.lastUserText(body),
      };
      requests.push(recorded);
      await answer(response, body, await pickStep(recorded), stream);
    })().catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(500, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message: String(error) } }));
    });
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    enqueue: (...steps) => {
      queue.push(...steps);
    },
    setHandler: (next) => {
      handler = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        // Hanging requests keep sockets open; drop them so close() returns.
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Write Server-Sent Events. */
export function writeSse(
  response: ServerResponse,
  events: Array<{ event?: string; data: unknown }>,
  done?: string,
): void {
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const event of events) {
    const prefix = event.event === undefined ? '' : `event: ${event.event}\n`;
    response.write(`${prefix}data: ${JSON.stringify(event.data)}\n\n`);
  }
  if (done !== undefined) response.write(`data: ${done}\n\n`);
  response.end();
}
