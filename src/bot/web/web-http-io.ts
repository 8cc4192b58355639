import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';

/** Reading requests and writing JSON answers for the playground's own routes (web-http.ts). */

/** Request bodies above this are refused with 413 before parsing. */
const WEB_BODY_MAX_BYTES = 1024 * 1024;

/** An expected failure: answered with its status and message. */
export class HttpProblem extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'HttpProblem';
    this.status = status;
  }
}

export function sendJson(response: ServerResponse, status: number, body: unknown, close = false): void {
  const payload = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(payload),
    'cache-control': 'no-store',
    ...(close ? { connection: 'close' } : {}),
  });
  response.end(payload);
}

function readBody(request: IncomingMessage): Promise<string> {
  const declared = Number(request.headers['content-length'] ?? '0');
  if (declared > WEB_BODY_MAX_BYTES) {
    request.resume();
    return Promise.reject(new HttpProblem(413, `body over ${WEB_BODY_MAX_BYTES} bytes`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    request.on('data', (chunk: Buffer) => {
      if (tooLarge) return;
      size += chunk.length;
      if (size > WEB_BODY_MAX_BYTES) {
        tooLarge = true;
        reject(new HttpProblem(413, `body over ${WEB_BODY_MAX_BYTES} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    request.on('end', () => {
      if (tooLarge) return;
      // Most bodies arrive in one chunk: no copy then.
      resolve((chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)).toString('utf8'));
    });
    request.on('error', reject);
  });
}

/** The body parsed as JSON and checked with `schema`; 400 names the first field that failed. */
export async function readJson<T>(request: IncomingMessage, schema: z.ZodType<T>): Promise<T> {
  const raw = await readBody(request);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new HttpProblem(400, 'body: invalid JSON');
  }
  const result = schema.safeParse(parsed);
  if (!result.success) {
    const issue = result.error.issues[0];
    const field = issue === undefined || issue.path.length === 0 ? 'body' : issue.path.join('.');
    throw new HttpProblem(400, `${field}: ${issue?.message ?? 'invalid'}`);
  }
  return result.data;
}
