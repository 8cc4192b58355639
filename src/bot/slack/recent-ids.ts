/**
 * A bounded set of recently seen ids (insertion-ordered LRU). The adapter uses it to skip Slack's
 * retried deliveries of an event it already took; Redis de-duplication in the core is the
 * cross-process guarantee.
 */
export interface RecentIds {
  /** Records `id`; returns false when it was already seen. */
  add(id: string): boolean;
  has(id: string): boolean;
}

export function createRecentIds(maxEntries = 2000): RecentIds {
  const seen = new Set<string>();
  return {
    add(id: string): boolean {
      if (seen.has(id)) return false;
      seen.add(id);
      if (seen.size > maxEntries) {
        const oldest = seen.values().next().value;
        if (oldest !== undefined) seen.delete(oldest);
      }
      return true;
    },
    has(id: string): boolean {
      return seen.has(id);
    },
  };
}
