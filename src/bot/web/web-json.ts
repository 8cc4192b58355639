import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';

/** JSON helpers for playground routes that live outside web-http.ts (runs, turns). */

/** An expected failure with the HTTP status and a sentence for the page. */
export class WebRouteError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'WebRouteError';
    this.status = status;
  }
}

/**
 * A route outside web-http.ts: resolves true when it answered. It runs after the playground's own checks
 * (host, origin, token, content type), so it sees only admitted requests.
 */
export type WebRoute = (
  request: IncomingMessage,
  response: ServerResponse,
  method: string,
  path: string,
) => Promise<boolean>;

export function sendJson(response: ServerResponse, status: number, body: unknown): void {
  const payload = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(payload),
    'cache-control': 'no-store',
  });
  response.end(payload);
}

const MAX_BODY_BYTES = 16 * 1024;

export async function readJsonBody<T>(request: IncomingMessage, schema: z.ZodType<T>): Promise<T> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new WebRouteError(413, `body: over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new WebRouteError(400, 'body: invalid JSON');
  }
  const result = schema.safeParse(parsed);
  if (!result.success) {
    const issue = result.error.issues[0];
    const field = issue === undefined || issue.path.length === 0 ? 'body' : issue.path.join('.');
    throw new WebRouteError(400, `${field}: ${issue?.message ?? 'invalid'}`);
  }
  return result.data;
}

/** `decodeURIComponent` that answers 400 instead of throwing a URIError. */
export function decodePathPart(part: string, label: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new WebRouteError(400, `${label}: malformed URL encoding`);
  }
}
