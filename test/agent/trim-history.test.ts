import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/agent/messages.js';
import { trimHistory } from '../../src/agent/trim-history.js';

const user = (content: string): ChatMessage => ({ role: 'user', author: 'alice', content });
const answer = (content: string): ChatMessage => ({ role: 'assistant', content });
const call = (id: string): ChatMessage => ({
  role: 'assistant',
  content: '',
  toolCalls: [{ id, name: 'list_training_runs', arguments: '{}' }],
});
const result = (id: string): ChatMessage => ({
  role: 'tool',
  toolCallId: id,
  name: 'list_training_runs',
  content: '[]',
});

describe('trimHistory', () => {
  it('returns short histories unchanged', () => {
    const history = [user('a'), answer('b')];
    expect(trimHistory(history, 50)).toBe(history);
    expect(trimHistory([], 50)).toEqual([]);
  });

  it('keeps exactly the last `limit` messages when the window starts at a user message', () => {
    const history = Array.from({ length: 60 }, (_, index) =>
      index % 2 === 0 ? user(`u${index}`) : answer(`a${index}`),
    );
    const trimmed = trimHistory(history, 50);
    expect(trimmed).toHaveLength(50);
    expect(trimmed[0]).toEqual(user('u10'));
    expect(trimmed.at(-1)).toEqual(answer('a59'));
  });

  it('moves the cut forward past an assistant answer to the next user message', () => {
    const history = Array.from({ length: 61 }, (_, index) =>
      index % 2 === 0 ? user(`u${index}`) : answer(`a${index}`),
    );
    // Window of 50 starts at index 11 (an answer); the cut moves to u12.
    const trimmed = trimHistory(history, 50);
    expect(trimmed).toHaveLength(49);
    expect(trimmed[0]).toEqual(user('u12'));
  });

  it('never separates a tool call from its results', () => {
    // Blocks of [user, call, result, result-call, result, answer] = 6 messages each.
    const history: ChatMessage[] = [];
    for (let block = 0; block < 10; block += 1) {
      history.push(
        user(`u${block}`),
        call(`a${block}`),
        result(`a${block}`),
        call(`b${block}`),
        result(`b${block}`),
        answer(`done${block}`),
      );
    }
    for (const limit of [7, 13, 20, 50]) {
      const trimmed = trimHistory(history, limit);
      expect(trimmed[0]?.role).toBe('user');
      expect(trimmed.length).toBeLessThanOrEqual(limit);
      const callIds = new Set(
        trimmed.flatMap((message) =>
          message.role === 'assistant' ? (message.toolCalls ?? []).map((c) => c.id) : [],
        ),
      );
      const resultIds = trimmed.flatMap((message) => (message.role === 'tool' ? [message.toolCallId] : []));
      for (const id of resultIds) expect(callIds.has(id)).toBe(true);
    }
    // A window smaller than the last block keeps the whole block rather than splitting it.
    expect(trimHistory(history, 5)).toEqual(history.slice(-6));
  });

  it('falls back to the last user message before the window when one turn is longer than the limit', () => {
    const history: ChatMessage[] = [user('old'), answer('old answer'), user('current')];
    for (let index = 0; index < 30; index += 1) history.push(call(`c${index}`), result(`c${index}`));
    const trimmed = trimHistory(history, 50);
    expect(trimmed[0]).toEqual(user('current'));
    expect(trimmed).toHaveLength(61);
  });

  it('keeps everything when there is no user message at all', () => {
    const history: ChatMessage[] = [];
    for (let index = 0; index < 30; index += 1) history.push(call(`c${index}`), result(`c${index}`));
    expect(trimHistory(history, 50)).toHaveLength(60);
  });
});
