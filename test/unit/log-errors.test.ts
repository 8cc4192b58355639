import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';

/**
 * Issue 26 §6: errors are logged with their stack and their code. Every log call passes the error itself
 * as `err` (the logger's formatter turns it into type, message, stack, code and cause, redacted); none
 * flattens it to its message first.
 */
function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath, entry.name))
    .filter((path) => !path.includes(`${join('web', 'page')}`));
}

describe('error logging', () => {
  it('writes the stack, the code and the cause of a logged error', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const logger = createLogger('info', {}, { destination: sink });
    const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
    logger.error(
      { err: new ServiceError('delivery_in_progress', 'post failed', { retryable: true, cause }) },
      'x',
    );
    const line = JSON.parse(lines.join('')) as { err: Record<string, unknown> };
    expect(line.err.type).toBe('ServiceError');
    expect(line.err.message).toBe('post failed');
    expect(line.err.code).toBe('delivery_in_progress');
    expect(String(line.err.stack)).toMatch(/ServiceError: post failed\n\s+at /);
    expect((line.err.cause as Record<string, unknown>).code).toBe('ECONNREFUSED');
  });

  it('no log call in src/ drops the error to its message', () => {
    const flattened = /\berr: (String\(|errorMessage\(|\w+\.message\b)/;
    const offenders: string[] = [];
    for (const path of sourceFiles('src')) {
      readFileSync(path, 'utf8')
        .split('\n')
        .forEach((line, index) => {
          if (flattened.test(line)) offenders.push(`${path}:${index + 1}: ${line.trim()}`);
        });
    }
    expect(offenders).toEqual([]);
  });
});
