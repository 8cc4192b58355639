import type { ChatUser, Platform } from './chat-adapter.js';
import { decodeThreadId } from './chat-adapter.js';

/*
 * `SHEPHERD_APPROVERS` names people by stable platform id only — Slack `U…`, Discord snowflakes,
 * playground names — never by display name, which anyone can set to anything (including an
 * approver's id). An entry may carry a platform prefix (`slack:U02BOB`, `discord:1234`, `web:bob`);
 * an entry without one matches that id on any platform.
 */

export function isListedUser(list: readonly string[], platform: Platform, user: ChatUser): boolean {
  return list.some((entry) => {
    const separator = entry.indexOf(':');
    if (separator < 0) return entry === user.id;
    return entry.slice(0, separator) === platform && entry.slice(separator + 1) === user.id;
  });
}

/** The platform a thread id belongs to; `undefined` for a malformed id (then nobody matches). */
export function platformOfThread(threadId: string): Platform | undefined {
  try {
    return decodeThreadId(threadId).platform;
  } catch {
    return undefined;
  }
}

/** Whether `user`, acting in `threadId`, is one of the listed approvers. */
export function isApprover(list: readonly string[], threadId: string, user: ChatUser): boolean {
  const platform = platformOfThread(threadId);
  return platform !== undefined && isListedUser(list, platform, user);
}
