import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { approvalCard, cardsTitled } from '../helpers/flow.js';
import { deleteKeysWithPrefix, uniquePrefix } from '../helpers/redis.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/*
 * `run --logdir DIR`: a command run whose SummaryWriter writes into the workspace (not the run directory)
 * gets its event files read from DIR; DIR is recorded on the run; a DIR outside the workspace, through a
 * symlink too, is refused before any card.
 */

const WRITER = fileURLToPath(new URL('../fixtures/tfevents/tfevents_writer.py', import.meta.url));
const SCRIPT = `import os, time
from tfevents_writer import EventWriter, event, scalar_value, tfrecord
writer = EventWriter(os.path.join("tb", "exp1"))
for step in range(1, 31):
    loss = float("nan") if step >= 20 else 2.0 - step * 0.01
    writer._file.write(tfrecord(event(step=step, values=[scalar_value("loss", loss)]))); writer.flush()
    time.sleep(0.03)
writer.close()
`;

describe('run --logdir', () => {
  let llm: ScriptedLlmServer;
  let root: string;
  let workspace: string;
  let shepherd: TestApp;
  const prefix = uniquePrefix('logdir-flow');

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'not json at all' } });
    root = mkdtempSync(join(tmpdir(), 'shepherd-logdir-'));
    workspace = join(root, 'workspace');
    mkdirSync(workspace);
    mkdirSync(join(root, 'outside'));
    symlinkSync(join(root, 'outside'), join(workspace, 'escape'));
    writeFileSync(join(workspace, 'tb_cmd.py'), SCRIPT);
    copyFileSync(WRITER, join(workspace, 'tfevents_writer.py'));
    shepherd = await startTestApp({
      prefix,
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_MONITOR_INTERVAL_S: '0.25',
        SHEPHERD_APPROVERS: 'bob',
      },
    });
  });
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    await deleteKeysWithPrefix(prefix);
    rmSync(root, { recursive: true, force: true });
  });

  it('reads the event files the command writes under --logdir in the workspace', async () => {
    const threadId = await shepherd.mention('run --name tblog --logdir tb -- python3 -u tb_cmd.py', 'alice');
    const { card, approve } = await approvalCard(shepherd, threadId, 'tblog');
    expect((await shepherd.click(threadId, card.id, approve, 'bob')).status).toBe(200);
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'non-finite metric').length > 0,
      90_000,
    );
    expect(cardsTitled(messages, 'non-finite metric')[0]?.card?.title).toMatch(/at step 20$/);
    const runsDir = join(shepherd.dataDir, 'runs');
    const runId = readdirSync(runsDir)[0] ?? '';
    const meta = JSON.parse(readFileSync(join(runsDir, runId, 'meta.json'), 'utf8')) as { logDir?: string };
    expect(meta.logDir).toMatch(/workspace\/tb$/);
    await shepherd.reply(threadId, '@shepherd status tblog', 'alice');
    const status = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => message.text.includes('logdir:')),
    );
    expect(botMessages(status).find((message) => message.text.includes('logdir:'))?.text).toContain(
      `logdir: ${meta.logDir}`,
    );
  }, 150_000);

  it('refuses a --logdir outside the workspace, a symlink out included, before any card', async () => {
    for (const logdir of ['../outside', 'escape/tb']) {
      const threadId = await shepherd.mention(
        `run --name out --logdir ${logdir} -- python3 -u tb_cmd.py`,
        'alice',
      );
      const messages = await shepherd.waitForMessages(threadId, (all) =>
        botMessages(all).some((message) => /outside the workspace/.test(message.text)),
      );
      expect(botMessages(messages).find((message) => /outside/.test(message.text))?.text).toContain(
        `--logdir ${logdir} is outside the workspace`,
      );
      expect(messages.some((message) => message.card?.actions !== undefined)).toBe(false);
    }
  }, 60_000);
});
