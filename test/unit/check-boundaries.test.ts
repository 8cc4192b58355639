import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkBoundaries, SHEPHERD_RULES } from '../../scripts/check-boundaries.js';
import { createSourceTrees } from '../helpers/source-tree.js';

const trees = createSourceTrees('boundaries');
const tree = trees.create;

afterEach(() => trees.removeAll());

const rules = { ...SHEPHERD_RULES, ports: ['src/bot/chat-adapter.ts'] };

describe('check-boundaries', () => {
  it('reports an SDK in a port, two folders importing each other, a composition root and the runs store', () => {
    const root = tree({
      'src/bot/chat-adapter.ts': "import type { App } from '@slack/bolt';\nexport type Chat = App;\n",
      'src/agent/loop.ts': "import { tool } from '../tools/registry.js';\nexport const loop = tool;\n",
      'src/tools/registry.ts': "import { loop } from '../agent/loop.js';\nexport const tool = loop;\n",
      'src/app/features.ts': 'export const features = 1;\n',
      'src/bot/directory.ts':
        "import type { features } from '../app/features.js';\nexport type F = typeof features;\n",
      'src/runs/records/run-store.ts': 'export const store = 1;\n',
      'src/spend/report.ts':
        "import { store } from '../runs/records/run-store.js';\nexport const report = store;\n",
    });
    const violations = checkBoundaries(root, rules);
    expect(violations).toHaveLength(5);
    expect(violations).toContain(
      'files import each other in a cycle: src/agent/loop.ts, src/tools/registry.ts',
    );
    expect(violations).toContain(
      'port src/bot/chat-adapter.ts imports the package @slack/bolt (src/bot/chat-adapter.ts)',
    );
    expect(violations).toContain(
      'folders src/agent and src/tools import each other:\n' +
        '    src/agent/loop.ts → src/tools/registry.ts\n' +
        '    src/tools/registry.ts → src/agent/loop.ts',
    );
    expect(violations).toContain('src/bot/directory.ts imports the composition root src/app/features.ts');
    expect(violations).toContain(
      'src/spend/report.ts reaches behind the runs door: src/runs/records/run-store.ts (read through RunQueries, src/runs/run-queries.ts)',
    );
  });

  it('passes a tree that keeps the rules', () => {
    const root = tree({
      // zod and node built-ins are fine in a port.
      'src/bot/chat-adapter.ts':
        "import { z } from 'zod';\nimport { join } from 'node:path';\nexport const a = [z, join];\n",
      // One direction between folders, and root files (shared ground) both ways.
      'src/agent/loop.ts':
        "import { tool } from '../tools/registry.js';\nimport { shared } from '../shared.js';\nexport const loop = [tool, shared];\n",
      'src/tools/registry.ts': "import { shared } from '../shared.js';\nexport const tool = shared;\n",
      'src/shared.ts':
        "import type { Loop } from './agent/loop-types.js';\nexport const shared = 1;\nexport type L = Loop;\n",
      'src/agent/loop-types.ts': 'export type Loop = number;\n',
      // Composition roots and runs/ itself may use the run store.
      'src/runs/records/run-store.ts': 'export const store = 1;\n',
      'src/runs/lifecycle/run-service.ts':
        "import { store } from '../records/run-store.js';\nexport const service = store;\n",
      'src/app/features.ts':
        "import { store } from '../runs/records/run-store.js';\nexport const features = store;\n",
      'src/cli/cli.ts': "import { features } from '../app/features.js';\nexport const cli = features;\n",
    });
    expect(checkBoundaries(root, rules)).toEqual([]);
  });

  it('treats a subfolder as its own folder', () => {
    const root = tree({
      'src/bot/chat-adapter.ts': "import { web } from './web/web-adapter.js';\nexport const chat = web;\n",
      'src/bot/web/web-adapter.ts':
        "import type { chat } from '../chat-adapter.js';\nexport const web = 1;\nexport type C = typeof chat;\n",
    });
    expect(checkBoundaries(root, rules)).toEqual([
      'folders src/bot and src/bot/web import each other:\n' +
        '    src/bot/chat-adapter.ts → src/bot/web/web-adapter.ts\n' +
        '    src/bot/web/web-adapter.ts → src/bot/chat-adapter.ts',
      'files import each other in a cycle: src/bot/chat-adapter.ts, src/bot/web/web-adapter.ts',
    ]);
  });

  it('counts subfolders in their room, and finds a cycle of files inside one folder', () => {
    const root = tree({
      // src/bot/web → src/runs and src/runs → src/bot: no two folders import each other, two rooms do.
      'src/bot/chat-adapter.ts': 'export type Chat = { id: string };\n',
      'src/bot/web/run-page.ts':
        "import { meta } from '../../runs/run-meta.js';\nexport const page = meta;\n",
      'src/runs/run-meta.ts':
        "import type { Chat } from '../bot/chat-adapter.js';\nexport const meta = 1;\nexport type C = Chat;\n",
      // A type-only cycle of three files inside src/monitor.
      'src/monitor/evaluate.ts': "import type { B } from './observe.js';\nexport type A = B;\n",
      'src/monitor/observe.ts': "import type { C } from './observe-stall.js';\nexport type B = C;\n",
      'src/monitor/observe-stall.ts': "import type { A } from './evaluate.js';\nexport type C = A | 1;\n",
    });
    expect(checkBoundaries(root, rules)).toEqual([
      'rooms src/bot and src/runs import each other:\n' +
        '    src/bot/web/run-page.ts → src/runs/run-meta.ts\n' +
        '    src/runs/run-meta.ts → src/bot/chat-adapter.ts',
      'files import each other in a cycle: src/monitor/evaluate.ts, src/monitor/observe-stall.ts, src/monitor/observe.ts',
    ]);
  });
  it('names only files that exist, so a move cannot quietly switch a rule off', () => {
    const repository = resolve(import.meta.dirname, '../..');
    const named = [
      ...SHEPHERD_RULES.ports,
      ...SHEPHERD_RULES.compositionRoots,
      ...SHEPHERD_RULES.runsInternals,
    ];
    expect(named.filter((path) => !existsSync(resolve(repository, path)))).toEqual([]);
  });

  it('sends readers outside runs/ through RunQueries, not the reports or the life cycle inside', () => {
    const root = tree({
      'src/runs/run-reports.ts': 'export const status = 1;\n',
      'src/runs/lifecycle/run-transitions.ts': 'export const withRun = 1;\n',
      'src/runs/run-queries.ts':
        "import { status } from './run-reports.js';\nimport { withRun } from './lifecycle/run-transitions.js';\nexport const queries = [status, withRun];\n",
      'src/charts/chart.ts':
        "import { status } from '../runs/run-reports.js';\nimport { queries } from '../runs/run-queries.js';\nexport const chart = [status, queries];\n",
      'src/sweeps/sweep.ts':
        "import { withRun } from '../runs/lifecycle/run-transitions.js';\nexport const sweep = withRun;\n",
    });
    expect(checkBoundaries(root, rules)).toEqual([
      'src/charts/chart.ts reaches behind the runs door: src/runs/run-reports.ts (read through RunQueries, src/runs/run-queries.ts)',
      'src/sweeps/sweep.ts reaches behind the runs door: src/runs/lifecycle/run-transitions.ts (read through RunQueries, src/runs/run-queries.ts)',
    ]);
  });
});
