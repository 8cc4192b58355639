import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { deleteKeysWithPrefix, uniquePrefix } from '../helpers/redis.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { waitFor } from '../runs/harness.js';

const CRASHES_LATER = `import time, shepherd
for step in range(1, 61):
    shepherd.log_metrics(step=step, loss=2.0 / step)
    time.sleep(0.05)
raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)")
`;
const FINISHES_LATER = `import time, shepherd
for step in range(1, 61):
    shepherd.log_metrics(step=step, loss=2.0 / step)
    time.sleep(0.05)
shepherd.finish()
`;

const titled = (messages: PlaygroundMessage[], title: string) =>
  botMessages(messages).filter((m) => m.card?.title === title);

describe('a run that ended while the bot was down (issue 10 item 13)', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let workspace: string;
  let dataDir: string;
  let prefix: string;
  const environment = () => ({
    SHEPHERD_LLM_BASE_URL: llm.url,
    SHEPHERD_WORKSPACE: workspace,
    SHEPHERD_DATA_DIR: dataDir,
    SHEPHERD_MONITOR_INTERVAL_S: '0.25',
    SHEPHERD_AUTO_APPROVE_USD: '100',
  });

  beforeAll(async () => {
    llm = await startScriptedOpenAi({
      fallback: {
        text: JSON.stringify({ decision: 'WARNING', diagnosis: 'the batch does not fit in GPU memory' }),
      },
    });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-down-ws-'));
    dataDir = mkdtempSync(join(tmpdir(), 'shepherd-down-data-'));
    prefix = uniquePrefix('down');
    writeFileSync(join(workspace, 'crashes.py'), CRASHES_LATER);
    writeFileSync(join(workspace, 'finishes.py'), FINISHES_LATER);
    shepherd = await startTestApp({ environment: environment(), prefix, dataDir, keepState: true });
  });
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    await deleteKeysWithPrefix(prefix);
    rmSync(workspace, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('posts the full crash card (traceback, class, triage, buttons) and the finished summary after restart, once', async () => {
    const crashThread = await shepherd.mention('run crashes.py --gpus 0 --name crashes-down', 'alice');
    const finishThread = await shepherd.mention('run finishes.py --gpus 0 --name finishes-down', 'alice');
    const runs = await waitFor(async () => {
      const all = await shepherd.app.features.runs.list();
      return all.length === 2 && all.every((meta) => meta.status === 'running') ? all : undefined;
    });
    await shepherd.stop();
    for (const meta of runs) {
      await waitFor(() => existsSync(join(dataDir, 'runs', meta.id, 'exit_status.json')), 20_000);
    }
    const llmBefore = llm.requests.length;

    shepherd = await startTestApp({ environment: environment(), prefix, dataDir, keepState: true });
    const crashMessages = await shepherd.waitForMessages(
      crashThread,
      (all) =>
        titled(all, 'crashes-down failed').length > 0 &&
        botMessages(all).some((m) => /Triage of crashes-down/.test(m.text)),
      30_000,
    );
    const card = titled(crashMessages, 'crashes-down failed')[0]?.card;
    expect(card?.text).toMatch(/Traceback[\s\S]*CUDA out of memory/);
    expect(card?.fields).toEqual(expect.arrayContaining([{ label: 'Class', value: 'cuda_oom' }]));
    expect(card?.actions?.map((action) => action.label)).toEqual(['Acknowledge', 'Ask Shepherd to fix']);
    expect(llm.requests.length).toBeGreaterThan(llmBefore);
    const finishMessages = await shepherd.waitForMessages(
      finishThread,
      (all) => titled(all, 'finishes-down finished').length > 0,
    );
    expect(titled(finishMessages, 'finishes-down finished')[0]?.card?.text).toMatch(/at step 60/);

    // Another restart later: nothing is posted twice.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await shepherd.stop();
    shepherd = await startTestApp({ environment: environment(), prefix, dataDir, keepState: true });
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const finalCrash = await shepherd.messages(crashThread);
    const finalFinish = await shepherd.messages(finishThread);
    expect(titled(finalCrash, 'crashes-down failed')).toHaveLength(1);
    expect(botMessages(finalCrash).filter((m) => /Triage of crashes-down/.test(m.text))).toHaveLength(1);
    expect(titled(finalFinish, 'finishes-down finished')).toHaveLength(1);
  });
});
