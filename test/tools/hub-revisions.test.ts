import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createHubFileTools } from '../../src/research/hub-file-tools.js';
import type { ResearchSession } from '../../src/research/research-session.js';
import { createHubRevisions, revisionsNamedIn } from '../../src/tools/hub-revisions.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

/*
 * The revisions the Hub tools resolve in a thread (real Redis): `hub_repo_files` asks for the commit of
 * `main` beside the listing and keeps it; a launch keeps only the repos it names.
 */

const SHA = '060db6499f32faf8b98477b0a26969ef7d8b9987';
const HUB = 'http://hub.test';

/** A research session answering the Hub's tree listing and revision routes, recording what was asked. */
function fakeSession(asked: string[]): ResearchSession {
  const answer = (text: string, status = 200) => ({ status, contentType: 'application/json', text });
  return {
    endpoints: { hubUrl: HUB, docsUrl: HUB, githubApiUrl: HUB, githubToken: undefined },
    async get(url) {
      asked.push(url);
      if (url.includes('/tree/main'))
        return answer(JSON.stringify([{ type: 'file', path: 'config.json', size: 10, oid: 'x' }]));
      if (url === `${HUB}/api/models/Qwen/Qwen2.5-0.5B/revision/main`)
        return answer(JSON.stringify({ id: 'Qwen/Qwen2.5-0.5B', sha: SHA }));
      return answer('{"error":"Repository not found"}', 404);
    },
    getJson: async () => ({}),
    addSource: () => undefined,
    noteVersions: () => undefined,
    sources: () => [],
    versions: () => [],
  } as ResearchSession;
}

describe('Hub revisions resolved in a thread', () => {
  const redis = new Redis(TEST_REDIS_URL);
  const prefix = uniquePrefix('hub-revisions');

  afterAll(async () => {
    await deleteKeysWithPrefix(prefix);
    redis.disconnect();
  });

  it('hub_repo_files keeps the commit of main; an unknown repo keeps nothing', async () => {
    const revisions = createHubRevisions({ redis, prefix, now: () => new Date('2026-12-07T00:00:00Z') });
    const asked: string[] = [];
    const [files] = createHubFileTools(fakeSession(asked), undefined, revisions);
    const context = { threadId: 'web:c:t1', actor: { id: 'a', name: 'alice' } };
    const listed = await files?.execute({ repo: 'Qwen/Qwen2.5-0.5B', type: 'model' }, context);
    expect(String(listed)).toContain(`model Qwen/Qwen2.5-0.5B (main at ${SHA}), 1 entries:`);
    await files?.execute({ repo: 'someone/nothing', type: 'dataset' }, context);
    expect(asked).toContain(`${HUB}/api/datasets/someone/nothing/revision/main`);
    expect(await revisions.list('web:c:t1')).toEqual([
      {
        kind: 'model',
        repo: 'Qwen/Qwen2.5-0.5B',
        sha: SHA,
        via: 'hub_repo_files',
        resolvedAt: '2026-12-07T00:00:00.000Z',
      },
    ]);
    expect(await revisions.list('web:c:other')).toEqual([]);
  });

  it('a launch keeps the repos its text names', () => {
    const resolved = [
      { kind: 'model' as const, repo: 'Qwen/Qwen2.5-0.5B', sha: SHA, via: 'get_model_info', resolvedAt: 'x' },
      {
        kind: 'model' as const,
        repo: 'meta-llama/Llama-2-7b-hf',
        sha: 'abc1234',
        via: 'search_models',
        resolvedAt: 'x',
      },
      {
        kind: 'dataset' as const,
        repo: 'openai/gsm8k',
        sha: 'def5678',
        via: 'inspect_dataset',
        resolvedAt: 'x',
      },
    ];
    const named = revisionsNamedIn(
      resolved,
      'AutoModel.from_pretrained("Qwen/Qwen2.5-0.5B")\nload_dataset("openai/gsm8k")',
    );
    expect(named.map((revision) => revision.repo)).toEqual(['openai/gsm8k', 'Qwen/Qwen2.5-0.5B']);
  });
});
