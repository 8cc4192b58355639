/*
 * Pure text helpers for inbound Discord messages: how mentions read to the agent and how threads are named.
 */

const THREAD_NAME_LIMIT = 100;

const USER_MENTION = /<@!?(\d+)>/g;
const ROLE_OR_CHANNEL_MENTION = /<(?:@&|#)\d+>/g;

/** True when the raw content mentions the user `botId` (`<@id>` or the legacy `<@!id>`). */
export function mentionsUser(content: string, botId: string): boolean {
  for (const match of content.matchAll(USER_MENTION)) if (match[1] === botId) return true;
  return false;
}

/**
 * Rewrite `<@id>` mentions as `@name` so the agent reads `@shepherd status` as people see it. Unknown ids
 * stay as they are.
 */
export function readableMentions(content: string, names: ReadonlyMap<string, string>): string {
  return content.replace(USER_MENTION, (whole, id: string) => {
    const name = names.get(id);
    return name === undefined ? whole : `@${name}`;
  });
}

/** A thread name from the message's first words, without mentions, at most 100 characters. */
export function threadNameFrom(content: string, fallback: string): string {
  const words = content
    .replace(USER_MENTION, ' ')
    .replace(ROLE_OR_CHANNEL_MENTION, ' ')
    .replace(/```[\s\S]*?```/g, ' ')
    .replace(/[`*_~|>]/g, '')
    .replace(/\s+/g, ' ')
    .trim();
  const source = words === '' ? fallback : words;
  if (source.length <= THREAD_NAME_LIMIT) return source;
  const cut = source.slice(0, THREAD_NAME_LIMIT - 1);
  const lastSpace = cut.lastIndexOf(' ');
  // Prefer a word boundary unless it would throw away most of the name.
  return `${lastSpace > 40 ? cut.slice(0, lastSpace) : cut}…`;
}
