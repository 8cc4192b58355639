import { ResearchError } from '../errors.js';
import type { GuardedFetch } from './guarded-fetch.js';
import type { CachedResponse, ResearchSource, ResearchStore } from './research-store.js';

/**
 * One `research` call's working state, shared by its tools: every GET goes through the thread's cache
 * and the guarded fetch, and every URL whose content reached the sub-agent is recorded as a source (so
 * the summary's sources are what was really read, not what the model remembers).
 */

export interface ResearchEndpoints {
  hubUrl: string;
  docsUrl: string;
  githubApiUrl: string;
  githubToken: string | undefined;
}

export interface ResearchSession {
  endpoints: ResearchEndpoints;
  /** GET `url` (cached for the thread); a non-2xx answer is returned, not thrown. */
  get(url: string, headers?: Record<string, string>): Promise<CachedResponse>;
  /** GET and parse JSON; a non-2xx answer throws a `ResearchError` naming the status. */
  getJson(url: string, headers?: Record<string, string>): Promise<unknown>;
  addSource(source: ResearchSource): void;
  /** Library versions seen in fetched texts ("trl 0.19.1"). */
  noteVersions(text: string): void;
  sources(): ResearchSource[];
  versions(): string[];
}

const LIBRARIES = 'transformers|trl|peft|accelerate|datasets|deepspeed|torch|bitsandbytes';
const VERSION_PATTERN = new RegExp(
  `\\b(${LIBRARIES})\\s*(?:==|>=|~=|@\\s*v?|\\s+v)\\s*([0-9]+\\.[0-9]+(?:\\.[0-9]+)?)`,
  'gi',
);

/** A docs URL's version segment (`/docs/trl/v0.19.1/en/…` or `/docs/trl/main/…`). */
export function docsVersion(url: string): string | undefined {
  return /\/docs\/[^/]+\/(v\d[\w.]*|main)\//.exec(url)?.[1];
}

export function createResearchSession(options: {
  threadId: string;
  endpoints: ResearchEndpoints;
  store: ResearchStore;
  fetch: GuardedFetch;
  signal?: AbortSignal | undefined;
}): ResearchSession {
  const found = new Map<string, ResearchSource>();
  const versions = new Set<string>();

  async function get(url: string, headers: Record<string, string> = {}): Promise<CachedResponse> {
    return options.store.cached(options.threadId, url, async () => {
      const fetched = await options.fetch(url, {
        headers,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      });
      return { status: fetched.status, contentType: fetched.contentType, text: fetched.text };
    });
  }

  return {
    endpoints: options.endpoints,
    get,
    async getJson(url, headers = {}) {
      const response = await get(url, { accept: 'application/json', ...headers });
      if (response.status < 200 || response.status >= 300) {
        throw new ResearchError(
          'fetch_failed',
          `${url} answered HTTP ${response.status}: ${response.text.slice(0, 200).replace(/\s+/g, ' ')}`,
          { status: response.status },
        );
      }
      try {
        return JSON.parse(response.text) as unknown;
      } catch (error) {
        throw new ResearchError('bad_response', `${url} did not answer JSON`, { cause: error });
      }
    },
    addSource(source) {
      const known = found.get(source.url);
      if (known === undefined || (known.version === undefined && source.version !== undefined)) {
        found.set(source.url, source);
      }
    },
    noteVersions(text) {
      for (const match of text.matchAll(VERSION_PATTERN)) {
        versions.add(`${(match[1] ?? '').toLowerCase()} ${match[2] ?? ''}`);
        if (versions.size >= 20) return;
      }
    },
    sources: () => [...found.values()],
    versions: () => [...versions],
  };
}
