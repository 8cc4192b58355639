import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { createLaunchCapture } from '../../src/runs/launch/launch-capture.js';
import { testRunMeta } from '../helpers/run-meta.js';
import { until } from '../helpers/until.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('a stopping bot abandons the launch records under way (CI: ENOTEMPTY removing a run directory)', () => {
  let root = '';
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('kills a slow environment probe on close, and writes nothing into the run directory after it', async () => {
    root = mkdtempSync(join(tmpdir(), 'shepherd-capture-'));
    const runDir = join(root, 'runs', 'r-1');
    mkdirSync(runDir, { recursive: true });
    // A "python3" whose probe never answers: it records its pid, then waits far past the test.
    const python = join(root, 'python3');
    const pidFile = join(root, 'probe.pid');
    writeFileSync(python, `#!/bin/sh\necho $$ > ${pidFile}\nexec sleep 60\n`);
    chmodSync(python, 0o755);
    const capture = createLaunchCapture({
      runDir: () => runDir,
      python,
      environments: {},
      inherited: { PATH: process.env.PATH },
      timeoutMs: 60_000,
      logger: createLogger('silent'),
    });
    capture.capture(testRunMeta('r-1'));
    await until(
      () => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '',
      'the probe to start',
    );
    const probePid = Number(readFileSync(pidFile, 'utf8').trim());
    expect(alive(probePid)).toBe(true);

    await capture.close(50);

    expect(alive(probePid)).toBe(false);
    const recordPath = join(runDir, 'launch-records', 'launch-1.json');
    const record = JSON.parse(readFileSync(recordPath, 'utf8')) as Record<string, unknown>;
    // The first part was written before the probe; the probe's answer (or its failure) never was.
    expect(record.runId).toBe('r-1');
    expect(record.environment).toBeUndefined();
    expect(record.environmentNote).toBeUndefined();
    // A launch after close starts no capture at all.
    capture.capture(testRunMeta('r-2'));
    await capture.settle();
    expect(JSON.parse(readFileSync(recordPath, 'utf8')).runId).toBe('r-1');
  });
});
