import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { until } from '../helpers/until.js';

/*
 * `stop` while a local run is `evaluating`: the launcher's eval command ends, the run ends `stopped` with
 * no crash, no eval-failure alert and no finished card, and no process of the eval is left.
 */

const TRAIN_PY = `import time, shepherd
for step in range(1, 4):
    shepherd.log_metrics(step=step, loss=1.0 / step)
    time.sleep(0.05)
shepherd.finish()
`;

/** Runs until killed, its pid in a file so the test can check it is gone. */
const LONG_EVAL_PY = `import os, sys, time
with open(sys.argv[1], "w") as handle:
    handle.write(str(os.getpid()))
print("eval: started", flush=True)
while True:
    time.sleep(0.1)
`;

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('stop during a local --eval (playground, local executor)', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  const workspace = mkdtempSync(join(tmpdir(), 'shepherd-local-eval-stop-'));

  beforeAll(async () => {
    writeFileSync(join(workspace, 'train.py'), TRAIN_PY);
    writeFileSync(join(workspace, 'long_eval.py'), LONG_EVAL_PY);
    llm = await startScriptedOpenAi({ fallback: { text: 'ok' } });
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_MONITOR_INTERVAL_S: '0.5',
        SHEPHERD_GPUS: '0',
        SHEPHERD_MAX_AUTOFIX: '0',
        SHEPHERD_APPROVERS: 'bob',
        SHEPHERD_STOP_GRACE_S: '5',
      },
    });
  }, 60_000);

  afterAll(async () => {
    await shepherd?.stop();
    await llm?.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  it('ends the eval; the run is stopped, with no alert and no finished card', async () => {
    const pidFile = join(workspace, 'long-eval.pid');
    const threadId = await shepherd.mention(
      `run --name local-eval-stop --eval "python3 -u ${join(workspace, 'long_eval.py')} ${pidFile}" -- python3 -u train.py`,
      'alice',
    );
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, ': local-eval-stop').length > 0,
    );
    const card = cardsTitled(messages, ': local-eval-stop')[0];
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);
    const { id } = await shepherd.app.features.runs.find('local-eval-stop');
    const metaOf = () =>
      JSON.parse(readFileSync(join(shepherd.dataDir, 'runs', id, 'meta.json'), 'utf8')) as {
        status: string;
        evaluation?: { status: string };
      };

    await until(() => metaOf().status === 'evaluating' || undefined, 'status evaluating', 60_000);
    await until(() => (existsSync(pidFile) && readFileSync(pidFile, 'utf8') !== '') || undefined, 'the eval');
    const evalPid = Number(readFileSync(pidFile, 'utf8'));
    await shepherd.reply(threadId, 'stop local-eval-stop', 'alice');
    await until(() => metaOf().status === 'stopped' || undefined, 'status stopped', 30_000);
    await until(() => !processAlive(evalPid) || undefined, `the eval process ${evalPid} to end`, 20_000);
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => /^Stopped local-eval-stop/.test(message.text)),
    );
    // A few monitor ticks for a wrong alert to show up.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const after = await shepherd.messages(threadId);
    expect(cardsTitled(after, 'evaluation failed')).toHaveLength(0);
    expect(cardsTitled(after, 'local-eval-stop failed')).toHaveLength(0);
    expect(cardsTitled(after, 'local-eval-stop finished')).toHaveLength(0);
    expect(cardsTitled(after, 'Model ready')).toHaveLength(0);
    expect(metaOf().status).toBe('stopped');
    expect(metaOf().evaluation?.status).not.toBe('passed');
  }, 120_000);
});
