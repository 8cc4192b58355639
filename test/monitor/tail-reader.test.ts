import { appendFile, mkdtemp, rename, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FileCursor, readFileTail, readNewLines } from '../../src/monitor/tail-reader.js';

let directory: string;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), 'shepherd-tail-'));
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

describe('readNewLines', () => {
  it('returns only complete lines; a half-written line waits', async () => {
    const path = join(directory, 'half.jsonl');
    await writeFile(path, 'a\nb\nhal');
    const first = await readNewLines(path, undefined);
    expect(first.lines).toEqual(['a', 'b']);
    const again = await readNewLines(path, first.cursor);
    expect(again.lines).toEqual([]);
    await appendFile(path, 'f\nc\n');
    const second = await readNewLines(path, first.cursor);
    expect(second.lines).toEqual(['half', 'c']);
    expect(second.cursor?.offset).toBe(11);
  });

  it('detects truncation and replacement and reads again from 0', async () => {
    const path = join(directory, 'trunc.jsonl');
    await writeFile(path, 'one\ntwo\nthree\n');
    const first = await readNewLines(path, undefined);
    await truncate(path, 0);
    await appendFile(path, 'x\n');
    const afterTruncate = await readNewLines(path, first.cursor);
    expect(afterTruncate).toMatchObject({ reset: true, lines: ['x'] });

    const replacement = join(directory, 'replacement.jsonl');
    // Longer than before, so only the inode can tell it apart.
    await writeFile(replacement, 'new-1\nnew-2\nnew-3\n');
    await rename(replacement, path);
    const afterReplace = await readNewLines(path, afterTruncate.cursor);
    expect(afterReplace).toMatchObject({ reset: true, lines: ['new-1', 'new-2', 'new-3'] });
  });

  it('caps the bytes per read and continues on the next call; handles a missing file', async () => {
    const path = join(directory, 'cap.jsonl');
    await writeFile(path, `${Array.from({ length: 100 }, (_, index) => `line-${index}`).join('\n')}\n`);
    const seen: string[] = [];
    let cursor: FileCursor | undefined;
    let calls = 0;
    for (;;) {
      const chunk = await readNewLines(path, cursor, 64);
      seen.push(...chunk.lines);
      cursor = chunk.cursor;
      calls++;
      if (!chunk.more) break;
    }
    expect(calls).toBeGreaterThan(5);
    expect(seen).toEqual(Array.from({ length: 100 }, (_, index) => `line-${index}`));
    const missing = await readNewLines(join(directory, 'nope'), undefined);
    expect(missing).toMatchObject({ lines: [], cursor: undefined });
  });

  it('skips a single line longer than the cap instead of stalling', async () => {
    const path = join(directory, 'long.jsonl');
    await writeFile(path, `${'x'.repeat(200)}\nok\n`);
    let chunk = await readNewLines(path, undefined, 64);
    expect(chunk.oversized).toBe(1);
    const lines: string[] = [];
    while (chunk.more) {
      chunk = await readNewLines(path, chunk.cursor, 64);
      lines.push(...chunk.lines);
    }
    expect(lines.at(-1)).toBe('ok');
  });

  it('reads the tail of a file without its partial first line', async () => {
    const path = join(directory, 'log.txt');
    await writeFile(path, 'first line\nsecond line\nthird line\n');
    expect(await readFileTail(path, 16)).toBe('third line\n');
    expect(await readFileTail(join(directory, 'none'), 16)).toBe('');
  });
});
