import { mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type TestApp } from '../helpers/app-harness.js';
import { approvalCard, cardsTitled } from '../helpers/flow.js';
import { type MonitoredFlow, startMonitoredFlow } from '../helpers/monitored-flow.js';

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
  let flow: MonitoredFlow;
  let shepherd: TestApp;

  beforeAll(async () => {
    flow = await startMonitoredFlow('logdir-flow', () => ({
      'tb_cmd.py': SCRIPT,
      'tfevents_writer.py': readFileSync(WRITER, 'utf8'),
    }));
    shepherd = flow.shepherd;
    // A folder beside the workspace, and a symlink in the workspace out to it.
    mkdirSync(join(flow.root, 'outside'));
    symlinkSync(join(flow.root, 'outside'), join(flow.workspace, 'escape'));
  });
  afterAll(() => flow?.stop());

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
