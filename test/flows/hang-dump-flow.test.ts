import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/**
 * Issue 22, hang dumps: a real Python run using the helper hangs in an `all_reduce` stand-in (its main
 * thread waits on a lock another thread holds). The stall detector asks for the stacks (SIGUSR2 →
 * faulthandler → output.log), and the alert shows the main thread's innermost frame; triage sees the dump.
 */
const HANGING = `import threading, time, shepherd
lock = threading.Lock()

def hold_the_lock():
    with lock:
        time.sleep(600)

def all_reduce(tensor):
    with lock:  # the peer never arrives: blocks for good
        return tensor

for step in range(1, 6):
    shepherd.log_metrics(step=step, loss=1.0 / step)
    time.sleep(0.05)
threading.Thread(target=hold_the_lock, daemon=True).start()
time.sleep(0.2)
all_reduce(step)
`;

describe('hang dumps', () => {
  let llm: ScriptedLlmServer;
  let workspace: string;
  let shepherd: TestApp;

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'not json at all' } });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-hang-'));
    writeFileSync(join(workspace, 'hang.py'), HANGING);
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_MONITOR_INTERVAL_S: '0.25',
        SHEPHERD_STALL_S: '8',
        SHEPHERD_APPROVERS: 'bob',
        SHEPHERD_STOP_GRACE_S: '2',
      },
    });
  });
  afterAll(async () => {
    await shepherd?.stop();
    await llm?.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  it('shows the hanging all_reduce in the stall alert and gives triage every thread', async () => {
    const threadId = await shepherd.mention('run hang.py --gpus 0', 'alice');
    const pending = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'Approve').length > 0);
    const card = cardsTitled(pending, 'Approve')[0];
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);

    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'no progress').length > 0,
      30_000,
    );
    const stall = cardsTitled(messages, 'no progress')[0];
    expect(stall?.card?.text).toMatch(/Main thread stuck in: all_reduce \(train\.py:9\) ← <module>/);
    const run = await shepherd.app.features.runs.find('hang');
    const log = readFileSync(join(shepherd.dataDir, 'runs', run.id, 'output.log'), 'utf8');
    // faulthandler wrote every thread, the lock holder too, into output.log.
    expect(log).toMatch(/line \d+ in hold_the_lock/);
    expect(log).toMatch(/Current thread 0x[0-9a-f]+ \(most recent call first\)/);

    const fix = stall?.card?.actions?.find((action) => action.label === 'Ask Shepherd to fix');
    expect((await shepherd.click(threadId, stall?.id ?? '', fix?.actionId ?? '', 'bob')).status).toBe(200);
    await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => /Triage of hang/.test(m.text)),
      30_000,
    );
    const prompt = JSON.stringify(llm.requests.at(-1)?.body ?? {});
    expect(prompt).toContain('Hang dump: every thread');
    expect(prompt).toMatch(/line \d+ in hold_the_lock/);
  });
});
