/**
 * User id → display name via `users.info`, cached with a TTL. Failures fall back to the id
 * (cached briefly) so a missing `users:read` scope never blocks a turn.
 */
import type { Logger } from '../../logger.js';

/** The slice of `users.info` the directory reads. */
type UsersInfo = (arguments_: { user: string }) => Promise<{
  user?: {
    name?: string;
    real_name?: string;
    profile?: { display_name?: string; real_name?: string };
  };
}>;

interface UserDirectoryOptions {
  usersInfo: UsersInfo;
  logger: Logger;
  ttlMs?: number;
  failureTtlMs?: number;
  maxEntries?: number;
  now?: () => number;
}

interface UserDirectory {
  displayName(userId: string): Promise<string>;
}

export function createUserDirectory(options: UserDirectoryOptions): UserDirectory {
  const ttlMs = options.ttlMs ?? 10 * 60_000;
  const failureTtlMs = options.failureTtlMs ?? 30_000;
  const maxEntries = options.maxEntries ?? 5000;
  const now = options.now ?? Date.now;
  const cache = new Map<string, { name: Promise<string>; expiresAt: number }>();

  async function lookup(userId: string): Promise<{ name: string; ok: boolean }> {
    try {
      const response = await options.usersInfo({ user: userId });
      const user = response.user;
      const name = [user?.profile?.display_name, user?.profile?.real_name, user?.real_name, user?.name].find(
        (candidate): candidate is string => candidate !== undefined && candidate.trim() !== '',
      );
      return { name: name ?? userId, ok: true };
    } catch (error) {
      options.logger.warn({ err: error, userId }, 'slack users.info failed; using the user id as name');
      return { name: userId, ok: false };
    }
  }

  return {
    displayName(userId: string): Promise<string> {
      const cached = cache.get(userId);
      if (cached !== undefined && cached.expiresAt > now()) return cached.name;
      // Cache the promise so concurrent messages from one user cost one call.
      const entry = { name: Promise.resolve(userId), expiresAt: now() + ttlMs };
      entry.name = lookup(userId).then((result) => {
        if (!result.ok) entry.expiresAt = now() + failureTtlMs;
        return result.name;
      });
      cache.delete(userId);
      cache.set(userId, entry);
      if (cache.size > maxEntries) {
        const oldest = cache.keys().next().value;
        if (oldest !== undefined) cache.delete(oldest);
      }
      return entry.name;
    },
  };
}
