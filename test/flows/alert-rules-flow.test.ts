import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/*
 * Rules and mutes set from chat through the playground API, a full app restart in between, then the run
 * produces the data: the rule fires once with a chart, the muted detector stays silent, and the mute is
 * in the run's audit trail.
 */

/** A loss stuck at 1.0 with a constant learning rate: a plateau from the start. */
const FLAT = `import random, time, shepherd
random.seed(3)
for step in range(1, 161):
    shepherd.log_metrics(step=step, loss=1.0 + random.uniform(-0.003, 0.003), lr=1e-6)
    time.sleep(0.02)
shepherd.finish()
`;

const rulesScript = (goFile: string) => `import math, os, time, shepherd
while not os.path.exists(${JSON.stringify(goFile)}):
    time.sleep(0.1)
for step in range(1, 91):
    loss = 3.0 / math.sqrt(1 + step / 10.0)
    if step == 70:
        loss *= 10
    shepherd.log_metrics(step=step, loss=loss, eval_loss=2.0 + step * 0.02)
    time.sleep(0.03)
shepherd.finish()
`;

describe('alert rules and mutes from chat', () => {
  let llm: ScriptedLlmServer;
  let workspace: string;
  let dataDir: string;
  let prefix: string;
  let shepherd: TestApp;
  const environment = () => ({
    SHEPHERD_LLM_BASE_URL: llm.url,
    SHEPHERD_WORKSPACE: workspace,
    SHEPHERD_DATA_DIR: dataDir,
    SHEPHERD_MONITOR_INTERVAL_S: '0.25',
    SHEPHERD_APPROVERS: 'bob',
    SHEPHERD_STOP_GRACE_S: '3',
    SHEPHERD_PLATEAU_WINDOW: '40',
  });

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'not json at all' } });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-workspace-'));
    dataDir = mkdtempSync(join(tmpdir(), 'shepherd-data-'));
    prefix = uniquePrefix('rules-flow');
    writeFileSync(join(workspace, 'ruled.py'), rulesScript(join(workspace, 'go')));
    writeFileSync(join(workspace, 'flat.py'), FLAT);
    shepherd = await startTestApp({ environment: environment(), prefix, dataDir, keepState: true });
  });
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    await deleteKeysWithPrefix(prefix);
    rmSync(workspace, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** Sends a command and returns the bot's answer to it (other posts, e.g. "running", may interleave). */
  async function say(threadId: string, text: string, expected: RegExp, user = 'alice'): Promise<string> {
    const before = botMessages(await shepherd.messages(threadId)).length;
    await shepherd.reply(threadId, `@shepherd ${text}`, user);
    const answer = (all: PlaygroundMessage[]) =>
      botMessages(all)
        .slice(before)
        .find((message) => expected.test(message.text))?.text;
    return answer(await shepherd.waitForMessages(threadId, (all) => answer(all) !== undefined, 20_000)) ?? '';
  }

  it('keeps rules and mutes across a restart; the rule fires once with a chart, the muted detector is silent', async () => {
    const threadId = await shepherd.mention('run ruled.py --gpus 0', 'alice');
    const launch = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'ruled').length > 0,
      30_000,
    );
    const card = cardsTitled(launch, 'ruled')[0];
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);

    expect(await say(threadId, 'alert ruled when eval_loss > 2.5', /Rule ru_\w+ on ruled/)).toMatch(
      /when eval_loss > 2\.5/,
    );
    expect(await say(threadId, 'alert ruled when loss > banana', /cannot read the rule/)).toMatch(
      /eval_loss > 2\.5/,
    );
    expect(await say(threadId, 'mute ruled spike', /Muted spike alerts on ruled/)).toMatch(/alice/);
    expect(await say(threadId, 'mute ruled sneezes', /no detector "sneezes"/)).toMatch(/plateau/);
    expect(
      await say(threadId, 'mute ruled plateau for 2h', /Muted plateau alerts on ruled for 2h/),
    ).toBeTruthy();
    expect(await say(threadId, 'unmute ruled plateau', /Unmuted plateau/)).toBeTruthy();

    // A restart: a new app on the same Redis and data directory.
    await shepherd.stop();
    shepherd = await startTestApp({ environment: environment(), prefix, dataDir, keepState: true });

    const listed = await say(threadId, 'alerts ruled', /Alerts of ruled/);
    expect(listed).toMatch(/when eval_loss > 2\.5 \(by alice\)/);
    expect(listed).toMatch(/muted: spike \(until unmuted, by alice\)/);
    expect(listed).not.toMatch(/plateau/);

    // Read while the run waits: a completed run's rules, mutes and audit go with its last tick.
    const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    try {
      const runId = (await redis.keys(`${prefix}:alert-audit:*`))[0]?.split(':').at(-1) ?? '';
      const audit = (await redis.lrange(`${prefix}:alert-audit:${runId}`, 0, -1)).map(
        (line) => JSON.parse(line) as { action: string; detector: string; by: { name: string } },
      );
      expect(audit.map((entry) => `${entry.action}:${entry.detector}:${entry.by.name}`)).toEqual([
        'mute:spike:alice',
        'mute:plateau:alice',
        'unmute:plateau:alice',
      ]);
    } finally {
      redis.disconnect();
    }

    writeFileSync(join(workspace, 'go'), '');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((message) => message.card?.title === 'ruled finished'),
      60_000,
    );
    const ruleCards = cardsTitled(messages, 'rule "eval_loss > 2.5"');
    expect(ruleCards).toHaveLength(1);
    expect(ruleCards[0]?.card?.text).toMatch(
      /eval_loss is 2\.5\d* at step 26 — your rule `when eval_loss > 2\.5` \(set by alice\)/,
    );
    expect(ruleCards[0]?.card?.imageUrl ?? ruleCards[0]?.images?.[0]).toBeTruthy();
    expect(cardsTitled(messages, 'spike')).toEqual([]);
  }, 180_000);

  it('a plateau is one info note with a chart and a suggestion, without buttons', async () => {
    const threadId = await shepherd.mention('run flat.py --gpus 0', 'alice');
    const launch = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'flat').length > 0,
      30_000,
    );
    const card = cardsTitled(launch, 'flat')[0];
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((message) => message.card?.title === 'flat finished'),
      60_000,
    );
    const notes = cardsTitled(messages, 'stopped improving');
    expect(notes).toHaveLength(1);
    expect(notes[0]?.card?.actions ?? []).toEqual([]);
    expect(notes[0]?.card?.text).toMatch(/learning rate/);
    expect(notes[0]?.card?.imageUrl ?? notes[0]?.images?.[0]).toBeTruthy();
  }, 120_000);
});
