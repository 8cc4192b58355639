import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/cli.js';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';

const SCRIPT = `import time, shepherd
for step in range(1, 21):
    shepherd.log_metrics(step=step, loss=1.0 / step)
    time.sleep(0.01)
shepherd.finish()
`;

async function cli(argv: string[], environment: Record<string, string>) {
  let out = '';
  let error = '';
  const code = await main(argv, environment, {
    out: (text) => {
      out += text;
    },
    error: (text) => {
      error += text;
    },
  });
  return { code, out, error };
}

describe('shepherd runs / status from a shell', () => {
  let workspace: string;
  let shepherd: TestApp;
  let environment: Record<string, string>;

  beforeAll(async () => {
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-cli-'));
    writeFileSync(join(workspace, 'short.py'), SCRIPT);
    shepherd = await startTestApp({
      environment: { SHEPHERD_WORKSPACE: workspace, SHEPHERD_MONITOR_INTERVAL_S: '0.25' },
    });
    environment = {
      REDIS_URL: TEST_REDIS_URL,
      SHEPHERD_QUEUE_PREFIX: shepherd.prefix,
      SHEPHERD_DATA_DIR: shepherd.dataDir,
      SHEPHERD_WORKSPACE: workspace,
    };
    const threadId = await shepherd.mention('run short.py --gpus 0 --name cli-probe');
    const [card] = cardsTitled(
      await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'cli-probe').length > 0),
      'cli-probe',
    );
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob');
    await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.card?.title === 'cli-probe finished'),
      30_000,
    );
  });
  afterAll(async () => {
    await shepherd.stop();
    rmSync(workspace, { recursive: true, force: true });
  });

  it('`runs` lists the run with its status', async () => {
    // The finished card comes from the monitor; the run record turns `completed` on the next refresh.
    let result = await cli(['runs'], environment);
    for (let attempt = 0; attempt < 40 && !result.out.includes('completed'); attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      result = await cli(['runs'], environment);
    }
    expect(result.error).toBe('');
    expect(result.code).toBe(0);
    expect(result.out).toContain('cli-probe');
    expect(result.out).toMatch(/completed/);
  });

  it('`status <run>` prints its status and last metrics; an unknown run is an error', async () => {
    const result = await cli(['status', 'cli-probe'], environment);
    expect(result.code).toBe(0);
    expect(result.out).toContain('cli-probe');
    expect(result.out).toMatch(/step 20|20/);
    const unknown = await cli(['status', 'no-such-run'], environment);
    expect(unknown.code).toBe(1);
    expect(unknown.error).toMatch(/no-such-run/);
  });

  it('says plainly when Redis is not there', async () => {
    const result = await cli(['runs'], { ...environment, REDIS_URL: 'redis://127.0.0.1:1' });
    expect(result.code).toBe(1);
    expect(result.error).toContain('no Redis at redis://127.0.0.1:1');
  });
});
