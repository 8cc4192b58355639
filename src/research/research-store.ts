import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';

/**
 * What research keeps in Redis, per thread and for an hour: fetched texts by URL (a second question in
 * the thread does not fetch the same page again) and the sources of the thread's last research, which
 * the next script approval card shows as "based on".
 */

const RESEARCH_CACHE_TTL_S = 3600;

const sourceSchema = z.object({ url: z.string(), version: z.string().optional() });
export type ResearchSource = z.infer<typeof sourceSchema>;

export interface CachedResponse {
  status: number;
  contentType: string;
  text: string;
}
const cachedSchema = z.object({ status: z.number(), contentType: z.string(), text: z.string() });

function researchKeys(prefix: string) {
  return {
    cache: (threadId: string, url: string) =>
      `${prefix}:research:cache:${threadId}:${createHash('sha256').update(url).digest('hex').slice(0, 32)}`,
    sources: (threadId: string) => `${prefix}:research:sources:${threadId}`,
  };
}

export interface ResearchStore {
  /** A cached answer for `url` in this thread, or the one `load` fetches (kept when it is a 2xx). */
  cached(threadId: string, url: string, load: () => Promise<CachedResponse>): Promise<CachedResponse>;
  saveSources(threadId: string, sources: ResearchSource[]): Promise<void>;
  /** The sources of the thread's research within the last hour, newest research only. */
  lastSources(threadId: string): Promise<ResearchSource[]>;
}

function parseJson<Schema extends z.ZodType>(
  schema: Schema,
  raw: string | null,
): z.output<Schema> | undefined {
  if (raw === null) return undefined;
  try {
    const parsed = schema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

export function createResearchStore(options: { redis: Redis; prefix: string }): ResearchStore {
  const { redis } = options;
  const keys = researchKeys(options.prefix);
  return {
    async cached(threadId, url, load) {
      const key = keys.cache(threadId, url);
      const hit = parseJson(cachedSchema, await redis.get(key));
      if (hit !== undefined) return hit;
      const fresh = await load();
      if (fresh.status >= 200 && fresh.status < 300) {
        await redis.set(key, JSON.stringify(fresh), 'EX', RESEARCH_CACHE_TTL_S);
      }
      return fresh;
    },
    async saveSources(threadId, sources) {
      await redis.set(keys.sources(threadId), JSON.stringify(sources), 'EX', RESEARCH_CACHE_TTL_S);
    },
    async lastSources(threadId) {
      return parseJson(z.array(sourceSchema), await redis.get(keys.sources(threadId))) ?? [];
    },
  };
}
