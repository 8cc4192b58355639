import type { Redis } from 'ioredis';
import { z } from 'zod';

/**
 * The Hub revisions (commit shas) the agent's Hub tools resolved in a thread (`search_models`,
 * `get_model_info`, `inspect_dataset`), newest per repo. The next launch in the thread records the ones
 * its script, command, arguments or config name (launch-records/, `status --full`, the model card), so a
 * run says which revision of `org/name` was current when it was planned.
 */

const revisionSchema = z.object({
  kind: z.enum(['model', 'dataset']),
  repo: z.string(),
  sha: z.string(),
  /** The tool that resolved it. */
  via: z.string(),
  resolvedAt: z.string(),
});
type HubRevision = z.infer<typeof revisionSchema>;

/** A week: a thread planned today is usually launched within days. */
const KEEP_SECONDS = 7 * 24 * 3600;
/** A search answers up to 20 repos; more than this per thread is noise. */
const MAX_PER_THREAD = 200;

const hubRevisionKeys = (prefix: string) => ({
  thread: (threadId: string) => `${prefix}:hub-revisions:${threadId}`,
});

export interface HubRevisions {
  record(threadId: string, revisions: ReadonlyArray<Omit<HubRevision, 'resolvedAt'>>): Promise<void>;
  list(threadId: string): Promise<HubRevision[]>;
}

export function createHubRevisions(options: {
  redis: Redis;
  prefix: string;
  now?: () => Date;
}): HubRevisions {
  const keys = hubRevisionKeys(options.prefix);
  const now = options.now ?? (() => new Date());
  return {
    async record(threadId, revisions) {
      if (threadId === '' || revisions.length === 0) return;
      const key = keys.thread(threadId);
      const resolvedAt = now().toISOString();
      const fields = revisions.flatMap((revision) => [
        `${revision.kind}:${revision.repo}`,
        JSON.stringify({ ...revision, resolvedAt }),
      ]);
      const length = await options.redis.hlen(key);
      if (length >= MAX_PER_THREAD) return;
      await options.redis
        .multi()
        .hset(key, ...fields)
        .expire(key, KEEP_SECONDS)
        .exec();
    },
    async list(threadId) {
      const raw = await options.redis.hvals(keys.thread(threadId));
      return raw.flatMap((text) => {
        try {
          const parsed = revisionSchema.safeParse(JSON.parse(text));
          return parsed.success ? [parsed.data] : [];
        } catch {
          return [];
        }
      });
    },
  };
}

/** The revisions whose repo id the launch names (in its script, command, arguments, config or model id). */
export function revisionsNamedIn(revisions: readonly HubRevision[], text: string): HubRevision[] {
  return revisions
    .filter((revision) => text.includes(revision.repo))
    .sort((a, b) => a.kind.localeCompare(b.kind) || a.repo.localeCompare(b.repo));
}
