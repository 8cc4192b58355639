import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/config.js';
import { createHfJobsExecutor, type HfJobsExecutor } from '../../src/runs/hfjobs/hfjobs-executor.js';
import { PYTHON_RUNTIME_DIR } from '../../src/runs/records/run-files.js';
import { removeTree } from '../helpers/processes.js';
import {
  countLines,
  isOver,
  makeRun,
  makeRunsDir,
  readOutput,
  silentLogger,
  waitFor,
  waitForState,
} from './hfjobs-harness.js';

/*
 * Opt-in: the executor against the REAL Hugging Face Jobs API. It starts two cpu-basic jobs (about $0.01 an
 * hour, a minute or two each) in SHEPHERD_HF_NAMESPACE (default: the token's user). Run with
 *   SHEPHERD_HF_E2E=1 SHEPHERD_HUB_TOKEN=hf_… [SHEPHERD_HF_NAMESPACE=…] npx vitest run test/hfjobs/real-hub.test.ts
 * The token needs the job scope (and the namespace credits). Not run when this backend was written.
 */

const token = process.env.SHEPHERD_HUB_TOKEN;
const enabled = process.env.SHEPHERD_HF_E2E === '1' && token !== undefined && token !== '';
const SKIPPED =
  'skipped: set SHEPHERD_HF_E2E=1 and SHEPHERD_HUB_TOKEN (job scope) to run it against huggingface.co';

const settings: Config['hfJobs'] = {
  namespace: process.env.SHEPHERD_HF_NAMESPACE,
  image: 'python:3.12',
  flavor: 'cpu-basic',
};

describe.skipIf(!enabled)(`HF Jobs executor on the real Hub${enabled ? '' : ` (${SKIPPED})`}`, () => {
  let executor: HfJobsExecutor;
  let runsDir: string;

  beforeAll(async () => {
    runsDir = await makeRunsDir();
    executor = createHfJobsExecutor({
      settings,
      hub: { url: process.env.SHEPHERD_HUB_URL ?? 'https://huggingface.co', token },
      runDir: (runId) => `${runsDir}/${runId}`,
      helperDir: PYTHON_RUNTIME_DIR,
      logger: silentLogger,
    });
  });

  afterAll(async () => {
    await executor?.close();
    if (runsDir !== undefined) removeTree(runsDir);
  });

  it('prices cpu-basic from the live hardware list', async () => {
    const placement = await executor.placement?.({ gpus: 0, maxHours: 1 });
    expect(placement?.description).toMatch(/^HF Jobs cpu-basic \(\$\d+\.\d\d\/h\)/);
    expect(placement?.notes?.join(' ')).not.toMatch(/docs table/);
    expect((await executor.clusterInfo()).notes?.[0]).toMatch(/from the hardware list/);
  });

  it('runs a script, streams its lines (NaN included) into output.log and reports completion', {
    timeout: 600_000,
  }, async () => {
    const script =
      'import time\nfor step in range(1, 6):\n    print(f"step={step} loss={float(\'nan\') if step == 4 else 1.0 / step}", flush=True)\n    time.sleep(1)\n';
    const { meta, runDir } = await makeRun(runsDir, 'real-nan', script, { maxHours: 0.2 });
    const launched = { ...meta, ...(await executor.launch({ meta, runDir, gpuIndices: [] })) };
    const final = await waitForState(executor, launched, isOver, 'the real job to end', 540_000);
    expect(final).toEqual({ kind: 'exited', exitCode: 0 });
    const output = await readOutput(runDir);
    expect(countLines(output, 'step=4 loss=nan')).toBe(1);
    expect(countLines(output, 'step=5 loss=0.2')).toBe(1);
  });

  it('stop cancels a running job', { timeout: 600_000 }, async () => {
    const script = 'import time\nwhile True:\n    print("alive", flush=True)\n    time.sleep(2)\n';
    const { meta, runDir } = await makeRun(runsDir, 'real-stop', script, { maxHours: 0.2 });
    const launched = { ...meta, ...(await executor.launch({ meta, runDir, gpuIndices: [] })) };
    await waitFor(
      async () => ((await readOutput(runDir)).includes('alive') ? true : undefined),
      'the job to print',
      540_000,
    );
    expect(await executor.terminate(launched, { graceMs: 10_000, reason: 'stop' })).toMatchObject({
      kind: 'signaled',
      crashClass: 'cancelled',
    });
  });
});
