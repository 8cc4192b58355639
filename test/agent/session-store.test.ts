import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/agent/messages.js';
import { createSessionStore, type SessionStore, sessionKeys } from '../../src/agent/session-store.js';
import { createLogger } from '../../src/logger.js';
import { createTurnInbox } from '../../src/queue/turn-inbox.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

describe('session store (real Redis)', () => {
  let redis: Redis;
  const prefixes: string[] = [];
  const newPrefix = () => {
    const prefix = uniquePrefix('session');
    prefixes.push(prefix);
    return prefix;
  };

  beforeAll(() => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  });
  afterEach(async () => {
    await Promise.all(prefixes.splice(0).map((prefix) => deleteKeysWithPrefix(prefix)));
  });
  afterAll(() => {
    redis.disconnect();
  });

  const thread = 'web:general:1700000000.000100';
  const messages: ChatMessage[] = [
    { role: 'user', author: 'alice', authorId: 'U1', content: 'start it' },
    {
      role: 'assistant',
      content: '',
      toolCalls: [{ id: 'c1', name: 'list_training_runs', arguments: '{}' }],
    },
    { role: 'tool', toolCallId: 'c1', name: 'list_training_runs', content: '[]', isError: false },
    { role: 'assistant', content: 'No runs yet.' },
  ];

  /** Commits `messages` the way a finished turn does: the inbox trim and the append in one MULTI. */
  async function commitTurn(prefix: string, store: SessionStore, turn: ChatMessage[], text = 'go') {
    const inbox = createTurnInbox({ redis, prefix });
    const accepted = await inbox.accept(
      thread,
      {
        type: 'message',
        messageId: `m-${text}`,
        deliveryId: `d-${text}-${Math.random()}`,
        user: { id: 'U1', name: 'alice' },
        text,
        addressed: true,
        receivedAt: Date.now(),
      },
      { addressed: true, deliveryKey: `web:d-${text}-${Math.random()}` },
    );
    expect(accepted).toBe('accepted');
    const batch = await inbox.claimBatch(thread, 50);
    if (batch === undefined) throw new Error('no batch claimed');
    await inbox.commitBatch(thread, batch, (multi) => store.appendInTransaction(multi, thread, turn));
    expect(await inbox.length(thread)).toBe(0);
  }

  it('appends a turn together with its inbox commit, and survives a new connection', async () => {
    const prefix = newPrefix();
    const store = createSessionStore({ redis, prefix });
    expect(await store.load(thread)).toEqual([]);
    expect(await store.length(thread)).toBe(0);
    await commitTurn(prefix, store, messages.slice(0, 1), 'a');
    await commitTurn(prefix, store, messages.slice(1), 'b');
    // A turn that produced nothing (a duplicate command, say) still commits its batch.
    await commitTurn(prefix, store, [], 'c');

    const other = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    try {
      const reopened = createSessionStore({ redis: other, prefix });
      expect(await reopened.load(thread)).toEqual(messages);
      expect(await reopened.length(thread)).toBe(messages.length);
      expect(await createSessionStore({ redis: other, prefix: newPrefix() }).load(thread)).toEqual([]);
    } finally {
      other.disconnect();
    }
  });

  it('writes nothing when the transaction is discarded', async () => {
    const prefix = newPrefix();
    const store = createSessionStore({ redis, prefix });
    const multi = redis.multi();
    store.appendInTransaction(multi, thread, messages);
    multi.discard();
    expect(await store.load(thread)).toEqual([]);
  });

  it('skips corrupt entries', async () => {
    const prefix = newPrefix();
    const store = createSessionStore({ redis, prefix, logger: createLogger('silent') });
    const key = sessionKeys(prefix).history(thread);
    expect(store.historyKey(thread)).toBe(key);
    await commitTurn(prefix, store, messages.slice(0, 1), 'a');
    await redis.rpush(key, '{not json', JSON.stringify({ role: 'robot', content: 'x' }));
    await commitTurn(prefix, store, messages.slice(3), 'b');
    expect(await store.load(thread)).toEqual([messages[0], messages[3]]);
  });

  it('caps the history length', async () => {
    const prefix = newPrefix();
    const store = createSessionStore({ redis, prefix, maxEntries: 5 });
    for (let index = 0; index < 4; index += 1) {
      await commitTurn(
        prefix,
        store,
        [
          { role: 'user', author: 'bob', content: `q${index}` },
          { role: 'assistant', content: `a${index}` },
        ],
        `t${index}`,
      );
    }
    const loaded = await store.load(thread);
    expect(loaded).toHaveLength(5);
    expect(loaded[0]).toEqual({ role: 'assistant', content: 'a1' });
    expect(loaded.at(-1)).toEqual({ role: 'assistant', content: 'a3' });
  });
});
