import { appendFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePlainCommand } from '../../src/commands/parse-command.js';
import { createAlertPolicyStore } from '../../src/monitor/alerts/alert-policy.js';
import { parseDuration, parseRuleSpec } from '../../src/monitor/alerts/alert-rules.js';
import { createMonitor } from '../../src/monitor/monitor.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

describe('rule text', () => {
  it('reads the three forms', () => {
    expect(parseRuleSpec('eval_loss > 2.5')).toMatchObject({ metric: 'eval_loss', op: '>', value: 2.5 });
    expect(parseRuleSpec('reward < 0.2 for 100 steps')).toMatchObject({
      metric: 'reward',
      op: '<',
      forSteps: 100,
    });
    expect(parseRuleSpec('step<1000 at 2h')).toMatchObject({
      metric: 'step',
      op: '<',
      value: 1000,
      atS: 7200,
      text: 'step < 1000 at 2h',
    });
    expect(parseRuleSpec('rewards/margins <= -1e-3')).toMatchObject({
      metric: 'rewards/margins',
      value: -0.001,
    });
  });

  it('refuses what it cannot read, with an example', () => {
    expect(() => parseRuleSpec('loss is high')).toThrow(/eval_loss > 2\.5/);
    expect(() => parseRuleSpec('loss > 1 at soon')).toThrow(/duration/);
    expect(parseDuration('90m')).toBe(5400);
    expect(parseDuration('0h')).toBeUndefined();
  });

  it('parses the chat commands and leaves sentences to the agent', () => {
    expect(parsePlainCommand('@shepherd alert qwen-sft when eval_loss > 2.5')).toEqual({
      name: 'alert',
      run: 'qwen-sft',
      rule: 'eval_loss > 2.5',
    });
    expect(parsePlainCommand('alerts qwen-sft')).toEqual({ name: 'alerts', run: 'qwen-sft' });
    expect(parsePlainCommand('mute qwen-sft plateau for 2h')).toEqual({
      name: 'mute',
      run: 'qwen-sft',
      detector: 'plateau',
      duration: '2h',
    });
    expect(parsePlainCommand('unmute qwen-sft plateau')).toEqual({
      name: 'unmute',
      run: 'qwen-sft',
      detector: 'plateau',
    });
    expect(parsePlainCommand('alert qwen-sft remove ru_abc123')).toEqual({
      name: 'alert-remove',
      run: 'qwen-sft',
      ruleId: 'ru_abc123',
    });
    expect(parsePlainCommand('alert me when the run finishes')).toBeUndefined();
    expect(parsePlainCommand('mute the channel please')).toBeUndefined();
  });
});

describe('rules and mutes in the monitor', () => {
  const prefix = uniquePrefix('rules');
  let redis: Redis;
  let root: string;

  beforeAll(async () => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    root = await mkdtemp(join(tmpdir(), 'shepherd-rules-'));
  });
  afterAll(async () => {
    redis.disconnect();
    await deleteKeysWithPrefix(prefix);
    await rm(root, { recursive: true, force: true });
  });

  const alice = { id: 'U1', name: 'alice' };

  async function setup(runId: string) {
    await mkdir(join(root, runId), { recursive: true });
    let now = 0;
    const store = createAlertPolicyStore({ redis, prefix, clock: () => now });
    const monitor = createMonitor({
      redis,
      prefix,
      runDir: () => join(root, runId),
      clock: () => now,
      policy: store,
      detectors: { stallS: 1e9 },
    });
    const meta: RunMeta = {
      schemaVersion: 1,
      id: runId,
      name: runId,
      threadId: 'web:c:t',
      requester: alice,
      status: 'running',
      gpus: 0,
      gpuIndices: [],
      maxHours: 24,
      scriptVersion: 1,
      executor: 'local',
      launchCount: 1,
      createdAt: new Date(0).toISOString(),
      updatedAt: new Date(0).toISOString(),
      startedAt: new Date(0).toISOString(),
    };
    const fired: string[] = [];
    return {
      store,
      setNow: (value: number) => {
        now = value;
      },
      async tick(lines: string[]) {
        if (lines.length > 0) await appendFile(join(root, runId, 'metrics.jsonl'), `${lines.join('\n')}\n`);
        const result = await monitor.tick(runId, meta, { kind: 'alive' });
        await monitor.ack(
          runId,
          result.incidents.map((incident) => incident.id),
        );
        fired.push(...result.incidents.map((incident) => `${incident.kind}@${incident.step}`));
        return result;
      },
      fired,
    };
  }

  it('a `for N steps` rule fires once per episode and again after recovery', async () => {
    const run = await setup('reward-run');
    await run.store.addRule('reward-run', parseRuleSpec('reward < 0.2 for 100 steps'), alice);
    const line = (step: number, reward: number) => JSON.stringify({ step, reward });
    const reward = (step: number) => (step < 300 ? 0.5 : step < 500 ? 0.1 : step < 700 ? 0.5 : 0.1);
    for (let from = 0; from < 900; from += 50) {
      await run.tick(
        Array.from({ length: 5 }, (_, index) => line(from + index * 10, reward(from + index * 10))),
      );
    }
    // low from 300 → fires at 400; back up at 500; low again from 700 → fires at 800
    expect(run.fired).toEqual(['rule@400', 'rule@800']);
  });

  it('a time rule is checked once, when the run is that old', async () => {
    const run = await setup('slow-run');
    await run.store.addRule('slow-run', parseRuleSpec('step < 1000 at 2h'), alice);
    run.setNow(3600_000);
    await run.tick([JSON.stringify({ step: 400, loss: 1 })]);
    expect(run.fired).toEqual([]);
    run.setNow(7200_000);
    await run.tick([JSON.stringify({ step: 600, loss: 1 })]);
    run.setNow(7300_000);
    await run.tick([JSON.stringify({ step: 650, loss: 1 })]);
    expect(run.fired).toEqual(['rule@600']);
  });

  it('a mute for 2h silences its detector until it expires, and is audited', async () => {
    const run = await setup('muted-run');
    await run.store.mute('muted-run', 'nan', alice, 7200);
    run.setNow(60_000);
    await run.tick([JSON.stringify({ step: 1, loss: 1 }), '{"step": 2, "loss": NaN}']);
    expect(run.fired).toEqual([]);
    run.setNow(7300_000);
    // Ten finite points end the muted episode; the next NaN is a new one, and the mute has expired.
    await run.tick(Array.from({ length: 10 }, (_, index) => JSON.stringify({ step: 3 + index, loss: 1 })));
    await run.tick(['{"step": 20, "loss": NaN}']);
    expect(run.fired).toEqual(['nan@20']);
    expect((await run.store.audit('muted-run')).map((entry) => entry.action)).toEqual(['mute']);
  });

  it('skips a stored rule or mute of another shape instead of handing it to the detectors', async () => {
    const store = createAlertPolicyStore({ redis, prefix });
    const rule = await store.addRule('shapes-run', parseRuleSpec('loss > 2'), alice);
    await redis.hset(
      `${prefix}:alert-rules:shapes-run`,
      'ru_bad',
      JSON.stringify({ id: 'ru_bad', metric: 'loss' }),
    );
    await redis.hset(`${prefix}:alert-rules:shapes-run`, 'ru_torn', '{"id": "ru_torn", "met');
    await store.mute('shapes-run', 'spike', alice);
    await redis.hset(
      `${prefix}:alert-mutes:shapes-run`,
      'nope',
      JSON.stringify({ detector: 'everything', at: 'x' }),
    );
    const policy = await store.load('shapes-run');
    expect(policy.rules.map((item) => item.id)).toEqual([rule.id]);
    expect(policy.mutes.map((item) => item.detector)).toEqual(['spike']);
  });
});
