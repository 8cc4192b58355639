import { afterEach, describe, expect, it } from 'vitest';
import { findDeadExports } from '../../scripts/check-dead-exports.js';
import { createSourceTrees } from '../helpers/source-tree.js';

const trees = createSourceTrees('dead-exports');
const tree = trees.create;

afterEach(() => trees.removeAll());

const options = { checked: ['src'], importers: ['src', 'test'], allowed: [] };

const files = {
  'src/a.ts': [
    'export const used = 1;',
    'export function unused(): number { return 2; }',
    'export interface LocalOptions { size: number }',
    'export function sized(options: LocalOptions): number { return options.size; }',
  ].join('\n'),
  'src/b.ts':
    "import { used } from './a.js';\nimport { sized } from './a.js';\nexport const b = [used, sized];\n",
  'src/c.ts': 'export const c = 1;\nexport type C = number;\n',
  'src/d.ts': "export * from './e.js';\nexport { e as renamed } from './e.js';\n",
  'src/e.ts': 'export const e = 1;\n',
  'test/b.test.ts':
    "import * as everything from '../src/c.js';\nimport { b } from '../src/b.js';\nimport { renamed } from '../src/d.js';\nexport const t = [everything, b, renamed];\n",
};

describe('check-dead-exports', () => {
  it('reports an export nobody imports, and says whether its file still uses it', () => {
    expect(findDeadExports(tree(files), options)).toEqual([
      { path: 'src/a.ts', name: 'unused', usedLocally: false },
      { path: 'src/a.ts', name: 'LocalOptions', usedLocally: true },
    ]);
  });

  it('passes when every export is imported or allowed', () => {
    const root = tree(files);
    expect(
      findDeadExports(root, { ...options, allowed: ['src/a.ts#unused', 'src/a.ts#LocalOptions'] }),
    ).toEqual([]);
  });
});
