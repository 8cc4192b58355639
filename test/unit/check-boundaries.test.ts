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
      'src/features.ts': 'export const features = 1;\n',
      'src/bot/directory.ts':
        "import type { features } from '../features.js';\nexport type F = typeof features;\n",
      'src/runs/run-store.ts': 'export const store = 1;\n',
      'src/spend/report.ts': "import { store } from '../runs/run-store.js';\nexport const report = store;\n",
    });
    const violations = checkBoundaries(root, rules);
    expect(violations).toHaveLength(4);
    expect(violations).toContain(
      'port src/bot/chat-adapter.ts imports the package @slack/bolt (src/bot/chat-adapter.ts)',
    );
    expect(violations).toContain(
      'folders src/agent and src/tools import each other:\n' +
        '    src/agent/loop.ts → src/tools/registry.ts\n' +
        '    src/tools/registry.ts → src/agent/loop.ts',
    );
    expect(violations).toContain('src/bot/directory.ts imports the composition root src/features.ts');
    expect(violations).toContain(
      'src/spend/report.ts reaches behind the runs door: src/runs/run-store.ts (use the runs facade)',
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
        "import type { loop } from './agent/loop.js';\nexport const shared = 1;\nexport type L = typeof loop;\n",
      // Composition roots and runs/ itself may use the run store.
      'src/runs/run-store.ts': 'export const store = 1;\n',
      'src/runs/run-service.ts': "import { store } from './run-store.js';\nexport const service = store;\n",
      'src/features.ts': "import { store } from './runs/run-store.js';\nexport const features = store;\n",
      'src/cli/cli.ts': "import { features } from '../features.js';\nexport const cli = features;\n",
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
    ]);
  });
});
