/**
 * The launcher's start-up sits between the Approve click and the script's first line
 * (`approve_to_running_s`): it starts without site-packages (`python -S`), while the training script it
 * starts keeps its own (`site`, so installed packages import as before). A real local run, real processes.
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { createLocalExecutor } from '../../src/runs/local-executor.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { endProcessGroups, removeTree } from '../helpers/processes.js';
import { testRunMeta } from '../helpers/run-meta.js';
import { waitFor } from './harness.js';

/** Prints its own `site` state and its parent's (the launcher's) command line, then ends. */
const TRAIN = `import os, sys
launcher = open("/proc/%d/cmdline" % os.getppid(), "rb").read().split(b"\\0")
print("script: no_site=%d site_loaded=%s" % (sys.flags.no_site, "site" in sys.modules), flush=True)
print("launcher: %s" % " ".join(part.decode() for part in launcher if part), flush=True)
`;

describe('the local launcher', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'shepherd-launcher-start-'));
  const launched: RunMeta[] = [];

  afterAll(async () => {
    await endProcessGroups(launched.flatMap((meta) => (meta.pgid === undefined ? [] : [meta.pgid])));
    removeTree(root);
  });

  it('starts without site-packages, and the script it runs keeps them', async () => {
    const runsDir = path.join(root, 'runs');
    const runDir = path.join(runsDir, 'r-0101-5a17');
    mkdirSync(runDir, { recursive: true });
    writeFileSync(path.join(runDir, 'train.py'), TRAIN);
    const executor = createLocalExecutor({
      python: 'python3',
      runsDir,
      environment: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      gpuInventory: [],
      logger: createLogger('silent'),
    });
    const meta = testRunMeta('r-0101-5a17');
    const result = await executor.launch({ meta, runDir, gpuIndices: [] });
    launched.push({ ...meta, ...result } as RunMeta);
    const output = await waitFor(
      () => {
        const text = readFileSync(path.join(runDir, 'output.log'), 'utf8');
        return text.includes('=== launch 1 ended') ? text : undefined;
      },
      20_000,
      'the launch to end',
    );
    expect(output).toContain('script: no_site=0 site_loaded=True');
    expect(output).toMatch(/launcher: \S*python3 -S -u \S*shepherd_launcher\.py 1 train\.py /);
    expect(output).toContain('=== launch 1 ended: exit code 0 ===');
  });
});
