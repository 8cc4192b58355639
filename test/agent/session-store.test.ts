import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/agent/messages.js';
import { createSessionStore } from '../../src/agent/session-store.js';
import { createLogger } from '../../src/logger.js';
import { createKeys } from '../../src/redis.js';
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

  it('round-trips history and survives a new connection', async () => {
    const prefix = newPrefix();
    const store = createSessionStore({ redis, prefix });
    expect(await store.has(thread)).toBe(false);
    expect(await store.load(thread)).toEqual([]);
    await store.append(thread, messages.slice(0, 1));
    await store.append(thread, messages.slice(1));
    await store.append(thread, []);

    const other = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    try {
      const reopened = createSessionStore({ redis: other, prefix });
      expect(await reopened.load(thread)).toEqual(messages);
      expect(await reopened.has(thread)).toBe(true);
    } finally {
      other.disconnect();
    }
  });

  it('marks threads known without history, scoped by prefix', async () => {
    const prefix = newPrefix();
    const store = createSessionStore({ redis, prefix });
    await store.markKnown(thread);
    expect(await store.has(thread)).toBe(true);
    expect(await store.load(thread)).toEqual([]);
    expect(await createSessionStore({ redis, prefix: newPrefix() }).has(thread)).toBe(false);
  });

  it('skips corrupt entries', async () => {
    const prefix = newPrefix();
    const store = createSessionStore({ redis, prefix, logger: createLogger('silent') });
    const key = createKeys(prefix).session(thread);
    await store.append(thread, messages.slice(0, 1));
    await redis.rpush(key, '{not json', JSON.stringify({ role: 'robot', content: 'x' }));
    await store.append(thread, messages.slice(3));
    expect(await store.load(thread)).toEqual([messages[0], messages[3]]);
  });

  it('caps the history length', async () => {
    const prefix = newPrefix();
    const store = createSessionStore({ redis, prefix, maxEntries: 5 });
    for (let index = 0; index < 4; index += 1) {
      await store.append(thread, [
        { role: 'user', author: 'bob', content: `q${index}` },
        { role: 'assistant', content: `a${index}` },
      ]);
    }
    const loaded = await store.load(thread);
    expect(loaded).toHaveLength(5);
    expect(loaded[0]).toEqual({ role: 'assistant', content: 'a1' });
    expect(loaded.at(-1)).toEqual({ role: 'assistant', content: 'a3' });
  });
});
