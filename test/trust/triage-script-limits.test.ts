import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

const TOKEN = 'hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123';
const crashing = (extra: string) => `import time, shepherd
${extra}
for step in range(1, 6):
    shepherd.log_metrics(step=step, loss=1.0 / step)
    time.sleep(0.05)
raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
`;
const PADDING = Array.from({ length: 400 }, (_, index) => `# configuration note ${index}: keep as is`).join(
  '\n',
);

describe('a FIX is never derived from a cut or redacted script (issue 10 item 12)', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let workspace: string;

  beforeAll(async () => {
    llm = await startScriptedOpenAi({
      fallback: {
        text: JSON.stringify({
          decision: 'FIX',
          diagnosis: 'batch too large',
          script: 'import shepherd\nshepherd.finish()\n',
        }),
      },
    });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-limits-'));
    writeFileSync(join(workspace, 'long.py'), crashing(PADDING));
    writeFileSync(join(workspace, 'secret.py'), crashing(`HUB_TOKEN = "${TOKEN}"`));
    writeFileSync(join(workspace, 'plain.py'), crashing('BATCH = 64'));
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_MONITOR_INTERVAL_S: '0.25',
        SHEPHERD_AUTO_APPROVE_USD: '100',
      },
    });
  });
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  for (const [file, why] of [
    ['long', 'cut for length'],
    ['secret', 'with a secret redacted'],
  ] as const) {
    it(`answers only a warning when the script was ${why}`, async () => {
      const threadId = await shepherd.mention(`run ${file}.py --gpus 0 --name ${file}-run`, 'alice');
      const messages = await shepherd.waitForMessages(
        threadId,
        (all) => botMessages(all).some((m) => new RegExp(`Triage of ${file}-run`).test(m.text)),
        30_000,
      );
      const triage = botMessages(messages).find((m) => /Triage of/.test(m.text));
      expect(triage?.text).toMatch(/I am not proposing a script change/);
      expect(cardsTitled(messages, 'Approve script change')).toHaveLength(0);
      const prompt = JSON.stringify(llm.requests.at(-1)?.body);
      expect(prompt).toMatch(/Do NOT answer FIX/);
      expect(prompt).not.toContain(TOKEN);
    });
  }

  it('proposes a fix for a complete script, and a diff on the card never shows a secret', async () => {
    const threadId = await shepherd.mention('run plain.py --gpus 0 --name plain-run', 'alice');
    let messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Approve script change: plain-run').length === 1,
      30_000,
    );
    await shepherd.app.features.operations.updateScript(
      'plain-run',
      crashing(`BATCH = 8\nHUB_TOKEN = "${TOKEN}"`),
      'smaller batch, log in to the hub',
      { id: 'alice', name: 'alice' },
      `web:ml-runs:${threadId}`,
      'command',
    );
    messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Approve script change: plain-run').length === 2,
    );
    const card = cardsTitled(messages, 'Approve script change: plain-run')[1];
    expect(card?.card?.text).toMatch(/\+BATCH = 8/);
    expect(card?.card?.text).toMatch(/HUB_TOKEN = .*\[REDACTED\]/);
    expect(JSON.stringify(messages)).not.toContain(TOKEN);
  });
});
