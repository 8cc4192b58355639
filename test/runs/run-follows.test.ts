import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Notifier } from '../../src/bot/notifier.js';
import { createLogger } from '../../src/logger.js';
import { createRunFollows } from '../../src/runs/operations/run-follows.js';
import type { RunStore } from '../../src/runs/records/run-store.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { createFollowTools } from '../../src/tools/follow-tools.js';
import { createToolRegistry } from '../../src/tools/registry.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const meta = (patch: Partial<RunMeta>): RunMeta => ({
  schemaVersion: 1,
  id: 'r-1',
  name: 'loop',
  threadId: 'web:ml:m1',
  requester: { id: 'alice', name: 'alice' },
  status: 'completed',
  gpus: 0,
  gpuIndices: [],
  maxHours: 1,
  scriptVersion: 1,
  executor: 'local',
  launchCount: 1,
  createdAt: '2026-01-01T00:00:00Z',
  updatedAt: '2026-01-01T00:00:00Z',
  ...patch,
});

describe('run follows (real Redis)', () => {
  let redis: Redis;
  let prefix: string;
  let dataDir: string;
  const pushed: Array<{ threadId: string; eventId: string; text: string }> = [];
  const posted: string[] = [];

  const follows = (maxTurns: number) =>
    createRunFollows({
      redis,
      prefix,
      store: { runDir: (id: string) => join(dataDir, id) } as unknown as RunStore,
      notifier: {
        post: async (_threadId: string, text: string) => {
          posted.push(text);
          return { messageId: 'x' };
        },
      } as unknown as Notifier,
      maxTurns,
      pushEvent: async (threadId, eventId, text) => {
        pushed.push({ threadId, eventId, text });
      },
      logger: createLogger('silent'),
    });

  beforeAll(() => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    prefix = uniquePrefix('follows');
    dataDir = mkdtempSync(join(tmpdir(), 'shepherd-follows-'));
    mkdirSync(join(dataDir, 'r-1'));
    writeFileSync(
      join(dataDir, 'r-1', 'metrics.jsonl'),
      '{"step": 10, "loss": 0.5}\n{"step": 20, "loss": 0.25}\n{"step": 20, "eval_acc": 0.7}\n',
    );
  });
  afterAll(async () => {
    await deleteKeysWithPrefix(prefix);
    redis.disconnect();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('fires once per event and launch, only for followed events, and stops at SHEPHERD_MAX_FOLLOW_TURNS', async () => {
    const service = follows(2);
    // Nobody follows: nothing happens.
    await service.onRunEnded(meta({}));
    expect(pushed).toHaveLength(0);

    await service.follow({
      runId: 'r-1',
      runName: 'loop',
      threadId: 'web:ml:m1',
      events: ['finished', 'stalled'],
      note: 'relaunch it with a lower lr',
      by: { id: 'agent', name: 'alice' },
    });
    await service.onRunEnded(meta({ status: 'failed', statusReason: 'exit 1' }));
    expect(pushed).toHaveLength(0); // `failed` is not followed

    await service.onRunEnded(meta({ lastStep: 20 }));
    await service.onRunEnded(meta({ lastStep: 20 })); // the same ending seen twice
    expect(pushed).toEqual([
      {
        threadId: 'web:ml:m1',
        eventId: 'follow-r-1-finished-1',
        text: '[follow] run loop (r-1) finished at step 20, loss 0.25; you asked: relaunch it with a lower lr',
      },
    ]);

    // Alerts are not followed; a stall is, once per launch.
    await service.onIncident(meta({ status: 'running' }), { kind: 'spike', title: 'Loss spike', step: 15 });
    await service.onIncident(meta({ status: 'running', launchCount: 2 }), {
      kind: 'stall',
      title: 'Stalled',
    });
    await service.onIncident(meta({ status: 'running', launchCount: 2 }), {
      kind: 'stall',
      title: 'Stalled',
    });
    expect(pushed.map((item) => item.eventId)).toEqual(['follow-r-1-finished-1', 'follow-r-1-stalled-2']);
    expect(await service.turnsUsed('r-1')).toBe(2);

    // A third launch finishing would be the third turn: refused once, said plainly, no turn.
    await service.onRunEnded(meta({ launchCount: 3, lastStep: 20 }));
    await service.onRunEnded(meta({ launchCount: 4, lastStep: 20 }));
    expect(pushed).toHaveLength(2);
    expect(posted).toHaveLength(1);
    expect(posted[0]).toMatch(
      /loop finished at step 20, loss 0\.25\. I am not starting another follow-up turn: this run has used its 2 \(SHEPHERD_MAX_FOLLOW_TURNS\)/,
    );

    expect((await service.forThread('web:ml:m1')).map((follow) => follow.runId)).toEqual(['r-1']);
    expect((await service.unfollow('r-1'))?.note).toBe('relaunch it with a lower lr');
    expect(await service.forThread('web:ml:m1')).toEqual([]);
  });

  it('follow_run refuses a run that is over, says what it replaces, and unfollow_run removes it', async () => {
    const service = follows(5);
    const runs: Record<string, RunMeta> = {
      done: meta({ id: 'r-done', name: 'done', status: 'completed', lastStep: 99 }),
      live: meta({ id: 'r-live', name: 'live', status: 'running' }),
    };
    const registry = createToolRegistry(
      createFollowTools({
        follows: service,
        findRun: async (run) => runs[run] ?? Promise.reject(new Error(`no run named ${run}`)),
        maxTurns: 5,
      }),
    );
    const call = (name: string, input: object, threadId = 'web:ml:m2') =>
      registry.execute(
        { id: 'c1', name, arguments: JSON.stringify(input) },
        { threadId, actor: { id: 'alice', name: 'alice' } },
      );

    const over = await call('follow_run', { run: 'done', events: ['finished'], note: 'eval' });
    expect(over).toEqual({
      isError: true,
      content: expect.stringMatching(/^Refused \(run_over\): done is already completed \(last step 99\)/),
    });
    const bad = await call('follow_run', { run: 'live', events: ['exploded'], note: 'x' });
    expect(bad.isError).toBe(true);
    expect(bad.content).toMatch(/invalid arguments for follow_run: events\.0/);

    const first = await call('follow_run', {
      run: 'live',
      events: ['finished', 'finished'],
      note: 'eval it',
    });
    expect(first.content).toMatch(
      /^Following live \(r-live, now running\) for: finished\. .*5 follow-up turns left/,
    );
    const second = await call('follow_run', { run: 'live', events: ['failed'], note: 'why' }, 'web:ml:m3');
    expect(second.content).toMatch(/replaces a follow alice set in another thread/);
    expect(await service.forThread('web:ml:m2')).toEqual([]);
    expect((await service.forThread('web:ml:m3')).map((follow) => follow.note)).toEqual(['why']);

    expect((await call('unfollow_run', { run: 'live' })).content).toBe(
      'Stopped following live (was: failed; "why").',
    );
    expect((await call('unfollow_run', { run: 'live' })).content).toBe('Nobody was following live.');
  });
});
