import type { ChatMessage } from './messages.js';

export const DEFAULT_HISTORY_LIMIT = 50;

/**
 * Keep the last `limit` messages, cutting only where a user message starts so an assistant tool
 * call is never separated from its results. If the window opens mid tool exchange the cut moves
 * forward to the next user message; if there is none (one turn longer than the window) it moves
 * back to the last user message before the window instead, because a well-formed history matters
 * more than the exact size.
 */
export function trimHistory(messages: ChatMessage[], limit: number = DEFAULT_HISTORY_LIMIT): ChatMessage[] {
  if (messages.length <= limit) return messages;
  const windowStart = messages.length - limit;
  for (let index = windowStart; index < messages.length; index += 1) {
    if (messages[index]?.role === 'user') return messages.slice(index);
  }
  for (let index = windowStart - 1; index >= 0; index -= 1) {
    if (messages[index]?.role === 'user') return messages.slice(index);
  }
  return messages;
}
