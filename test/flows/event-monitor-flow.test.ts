import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/** Healthy for 40 steps, then NaN; it writes the wall time of its first NaN line to `nanAtFile`. */
const nanScript = (nanAtFile: string) => `import math, time, shepherd
for step in range(1, 81):
    if step == 40:
        open(${JSON.stringify(nanAtFile)}, "w").write(repr(time.time()))
    loss = float("nan") if step >= 40 else 2.0 / math.sqrt(step)
    shepherd.log_metrics(step=step, loss=loss)
    time.sleep(0.05)
shepherd.finish()
`;

describe('event-driven monitor (playground, timer at 30 s)', () => {
  let llm: ScriptedLlmServer;
  let workspace: string;
  let shepherd: TestApp;

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'All quiet.' } });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-events-'));
    writeFileSync(join(workspace, 'nan.py'), nanScript(join(workspace, 'nan_at')));
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_LLM_MODEL: 'test-model',
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_MONITOR_INTERVAL_S: '30',
        SHEPHERD_APPROVERS: 'bob',
      },
    });
  });
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  it('posts the NaN alert card within 3 s of the NaN line, long before the next 30 s tick', async () => {
    const threadId = await shepherd.mention('run nan.py --gpus 0');
    const [card] = cardsTitled(
      await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'nan').length > 0),
      'nan',
    );
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) =>
        botMessages(all).some((m) => m.card?.actions?.some((action) => action.label === 'Acknowledge')),
      30_000,
    );
    const seenAt = Date.now();
    const alert = botMessages(messages).find((m) => m.card?.actions?.some((a) => a.label === 'Acknowledge'));
    expect(JSON.stringify(alert?.card)).toMatch(/NaN/i);
    const nanAt = Number(readFileSync(join(workspace, 'nan_at'), 'utf8')) * 1000;
    expect(seenAt - nanAt).toBeGreaterThan(0);
    expect(seenAt - nanAt).toBeLessThan(3_000);
  });
});
