import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { findOffenders, measureSource, staleAllowances } from '../../scripts/check-sizes.js';

const run = promisify(execFile);
const SCRIPT = 'scripts/check-sizes.ts';

/** `count` statement lines, so a function's size is exact. */
function statements(count: number, indent = '  '): string {
  return Array.from({ length: count }, (_, index) => `${indent}total += ${index};`).join('\n');
}

/** A factory of 63 own lines returning a method of 71: both under the limit, 132 lines in all. */
const FACTORY_WITH_METHOD = `export function createCounter() {
  let total = 0;
${statements(56)}
  return {
    add(step: number) {
${statements(68, '      ')}
      return total + step;
    },
  };
}
`;

const fixtures = mkdtempSync(join(tmpdir(), 'check-sizes-'));
afterAll(() => rmSync(fixtures, { recursive: true, force: true }));

function writeFixture(name: string, files: Record<string, string>): string {
  const root = join(fixtures, name);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

async function check(root: string): Promise<{ code: number; stdout: string }> {
  try {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', SCRIPT, root]);
    return { code: 0, stdout };
  } catch (error) {
    const failed = error as { code: number; stdout: string };
    return { code: failed.code, stdout: failed.stdout };
  }
}

describe('measureSource', () => {
  it('counts nested function bodies toward the nested function, not the factory around it', () => {
    const size = measureSource('counter.ts', FACTORY_WITH_METHOD);
    expect(size.lines).toBe(132);
    expect(size.functions).toEqual([
      // 132 lines minus the 69 body lines of `add`; its header and closing brace stay with the factory.
      { name: 'createCounter', line: 1, ownLines: 63 },
      { name: 'add', line: 60, ownLines: 71 },
    ]);
  });

  it('names arrow functions after their binding and callbacks after the call they are handed to', () => {
    const text = [
      'const double = (value: number) => value * 2;',
      'items.forEach((item) => {',
      '  use(item);',
      '});',
    ];
    const names = measureSource('names.ts', text.join('\n')).functions.map((fn) => fn.name);
    expect(names).toEqual(['double', 'forEach(callback)']);
  });
});

describe('findOffenders', () => {
  const longFunction = `export function tooLong() {\n  let total = 0;\n${statements(80)}\n}\n`;

  it('reports a function over 80 own lines and a file over 400 lines, unless allowed', () => {
    const files = [
      { path: 'src/long-function.ts', text: longFunction },
      { path: 'src/long-file.ts', text: `${'export const line = 1;\n'.repeat(401)}` },
    ];
    expect(findOffenders(files)).toEqual([
      { path: 'src/long-function.ts', line: 1, name: 'tooLong', lines: 83 },
      { path: 'src/long-file.ts', line: 1, name: '<file>', lines: 401 },
    ]);
    expect(
      findOffenders(files, [{ path: 'src/long-function.ts', name: 'tooLong' }, { path: 'src/long-file.ts' }]),
    ).toEqual([]);
  });

  it('names the allow-list entries that no longer match an offender', () => {
    const offenders = findOffenders([{ path: 'src/long-function.ts', text: longFunction }]);
    const allowed = [
      { path: 'src/long-function.ts', name: 'tooLong' },
      { path: 'src/long-function.ts', name: 'split' },
      { path: 'src/gone.ts' },
    ];
    expect(staleAllowances(allowed, offenders)).toEqual([
      { path: 'src/long-function.ts', name: 'split' },
      { path: 'src/gone.ts' },
    ]);
  });

  it('accepts exactly 80 own lines and exactly 400 lines', () => {
    const files = [
      { path: 'src/edge.ts', text: `export function edge() {\n${statements(78)}\n}\n` },
      { path: 'src/edge-file.ts', text: 'export const line = 1;\n'.repeat(400) },
    ];
    expect(findOffenders(files)).toEqual([]);
  });
});

describe('scripts/check-sizes.ts', () => {
  it('fails and prints `path:line name lines` for a tree that breaks the rule', async () => {
    const root = writeFixture('failing', {
      'src/ok.ts': FACTORY_WITH_METHOD,
      'src/deep/too-long.ts': `export const handler = () => {\n${statements(90)}\n};\n`,
    });
    const result = await check(root);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('src/deep/too-long.ts:1 handler 92\n');
    expect(result.stdout).not.toContain('src/ok.ts');
  });

  it('passes a tree within the limits', async () => {
    const root = writeFixture('passing', {
      'src/ok.ts': FACTORY_WITH_METHOD,
      'src/notes.md': 'not checked\n',
    });
    const result = await check(root);
    expect(result).toEqual({ code: 0, stdout: '' });
  });
});
