import { describe, expect, it } from 'vitest';
import { MAX_BYTES, MAX_LINES, readNumbered } from '../../src/tools/run-file-reader.js';
import { applyEdits } from '../../src/tools/script-edits.js';

/* read_run_file's bounds (200 lines or 16 KB per call, each answer says how to get more) and edit_script's matching. */

const lines = (count: number, width = 10) =>
  Array.from({ length: count }, (_, index) => `line ${index + 1} ${'x'.repeat(width)}`);

describe('readNumbered', () => {
  it('never returns more than 200 lines, and says where to continue', async () => {
    const text = await readNumbered('output.log', lines(5000), { startLine: 100, endLine: 4000 }, 'tail');
    const numbered = text.split('\n').filter((line) => /^\s*\d+\| /.test(line));
    expect(numbered).toHaveLength(MAX_LINES);
    expect(numbered[0]).toMatch(/^100\| line 100 /);
    expect(text).toContain(
      '(lines 100–299 of 5000 in output.log; earlier: end_line=99, next: start_line=300',
    );
  });

  it('cuts at 16 KB even within 200 lines', async () => {
    const text = await readNumbered('output.log', lines(300, 400), {}, 'head');
    expect(Buffer.byteLength(text)).toBeLessThan(MAX_BYTES + 500);
    const numbered = text.split('\n').filter((line) => /^\s*\d+\| /.test(line));
    expect(numbered.length).toBeLessThan(MAX_LINES);
    expect(text).toContain(`next: start_line=${numbered.length + 1}`);
  });

  it('tails the last 100 lines by default and greps with context', async () => {
    const tail = await readNumbered('output.log', lines(1000), {}, 'tail');
    expect(tail).toContain('(lines 901–1000 of 1000 in output.log; earlier: end_line=900');
    const grep = await readNumbered('output.log', lines(1000), { grep: '^line 50[05] ' }, 'tail');
    expect(
      grep
        .split('\n')
        .filter((line) => /^\s*\d+\| /.test(line))
        .map((line) => Number(line.split('|')[0])),
    ).toEqual([498, 499, 500, 501, 502, 503, 504, 505, 506, 507]);
    expect(grep).toContain('(2 lines of output.log match /^line 50[05] /, 1000 lines in all.)');
  });
});

describe('applyEdits', () => {
  const script = 'a = 1\nb = 2\nprint(a)\nprint(b)\n';

  it('applies edits in order', () => {
    expect(
      applyEdits(script, [
        { old: 'a = 1', new: 'a = 3' },
        { old: 'print(b)', new: 'print(a + b)' },
      ]),
    ).toEqual({
      ok: true,
      script: 'a = 3\nb = 2\nprint(a)\nprint(a + b)\n',
    });
  });

  it('names every occurrence of an ambiguous old, and the closest lines of a missing one', () => {
    const ambiguous = applyEdits(script, [{ old: 'print(', new: 'log(' }]);
    expect(ambiguous).toEqual({
      ok: false,
      error: expect.stringContaining(
        'occurs 2 times in train.py, at:\n  line 3: print(a)\n  line 4: print(b)',
      ),
    });
    const missing = applyEdits(script, [{ old: 'b  = 2', new: 'b = 4' }]);
    expect(missing.ok).toBe(false);
    expect(!missing.ok && missing.error).toContain('line 2: b = 2');
    const second = applyEdits(script, [
      { old: 'a = 1', new: 'c = 1' },
      { old: 'a = 1', new: 'x' },
    ]);
    expect(!second.ok && second.error).toMatch(
      /^edit 2: `old` does not occur in train\.py \(after the edits before it\)/,
    );
  });
});
