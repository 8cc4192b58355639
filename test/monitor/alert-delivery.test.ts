import type { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LlmProvider } from '../../src/agent/llm-provider.js';
import type { Card, ChatAdapter } from '../../src/bot/chat-adapter.js';
import type { IdempotentNotifier } from '../../src/bot/notifier.js';
import { createLogger } from '../../src/logger.js';
import { createAlertService } from '../../src/monitor/alerts/alert-service.js';
import type { Monitor } from '../../src/monitor/monitor-types.js';
import type { Incident } from '../../src/monitor/types.js';
import { createNotifyWorker, createQueueNotifier, type QueueNotifier } from '../../src/queue/notify-queue.js';
import type { RunService } from '../../src/runs/lifecycle/run-service.js';
import type { RunOperations } from '../../src/runs/operations/operation-types.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import type { RunQueries } from '../../src/runs/run-queries.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const THREAD = 'slack:C1:1700000000.000100';

const meta: RunMeta = {
  schemaVersion: 1,
  id: 'r-delivery-1',
  name: 'delivery',
  threadId: THREAD,
  requester: { id: 'u', name: 'u' },
  status: 'running',
  gpus: 0,
  gpuIndices: [],
  maxHours: 1,
  scriptVersion: 1,
  executor: 'local',
  launchCount: 1,
  createdAt: new Date().toISOString(),
  updatedAt: new Date().toISOString(),
};

const incident: Incident = {
  id: `${meta.id}:spike:loss#1`,
  runId: meta.id,
  kind: 'spike',
  severity: 'warning',
  title: 'delivery: loss spike',
  summary: 'loss jumped tenfold at step 60',
  metrics: [],
  at: Date.now(),
  step: 60,
};

describe('alert delivery', () => {
  let redis: Redis;
  let prefix: string;
  let notifier: QueueNotifier;
  let worker: Worker;
  const cards: Card[] = [];

  beforeAll(() => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    prefix = uniquePrefix('alert-delivery');
    const adapter: ChatAdapter = {
      platform: 'slack',
      start: async () => undefined,
      stop: async () => undefined,
      postMessage: async () => ({ messageId: 'message' }),
      editMessage: async () => undefined,
      async postCard(_threadId, card) {
        cards.push(card);
        return { messageId: `card-${cards.length}` };
      },
      updateCard: async () => undefined,
      upload: async () => ({ messageId: 'file' }),
    };
    notifier = createQueueNotifier({ connection: redis, prefix, waitTimeoutMs: 20_000 });
    worker = createNotifyWorker({
      connection: redis,
      prefix,
      adapters: (platform) => (platform === 'slack' ? adapter : undefined),
      logger: createLogger('silent'),
    });
  });
  afterAll(async () => {
    await worker.close();
    await notifier.close();
    await deleteKeysWithPrefix(prefix);
    redis.disconnect();
  });

  it('a delivery retried after its card landed (but the wait for it failed) posts no second card', async () => {
    // The first card post lands in the thread, then its caller stops waiting (a timeout, a restart).
    let failNext = true;
    const landedThenLost = async <T>(post: Promise<T>): Promise<T> => {
      const result = await post;
      if (failNext) {
        failNext = false;
        throw new Error('Job wait card timed out before finishing');
      }
      return result;
    };
    const flaky: IdempotentNotifier = {
      ...notifier,
      postCard: (threadId, card) => landedThenLost(notifier.postCard(threadId, card)),
      postCardOnce: (key, threadId, card) => landedThenLost(notifier.postCardOnce(key, threadId, card)),
    };
    const alerts = createAlertService({
      redis,
      prefix,
      monitor: {} as Monitor,
      runs: {} as RunService,
      queries: { status: async () => Promise.reject(new Error('no status here')) } as unknown as RunQueries,
      operations: {} as RunOperations,
      notifier: flaky,
      provider: {} as LlmProvider,
      controlQueue: {} as Queue,
      quickchartUrl: 'http://127.0.0.1:9',
      maxAutofix: 3,
      python: 'python3',
      environment: {},
      logger: createLogger('silent'),
    });

    await expect(alerts.onIncident(incident, meta)).rejects.toThrow(/timed out/);
    // The next tick re-delivers the incident that was not acknowledged: this call records the alert, so
    // `shepherd_alerts_total` counts it here and only here.
    await expect(alerts.onIncident(incident, meta)).resolves.toBe(true);
    // And a later tick (an acknowledgement lost, a restart) finds the recorded card: not counted again.
    await expect(alerts.onIncident(incident, meta)).resolves.toBe(false);
    expect(cards.map((card) => card.title)).toEqual(['delivery: loss spike']);
  });
});
