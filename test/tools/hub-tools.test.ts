import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createHubClient } from '../../src/tools/hub-api.js';
import { createHubTools, formatCount } from '../../src/tools/hub-tools.js';
import { HubError } from '../../src/tools/hub-types.js';
import { createToolRegistry } from '../../src/tools/registry.js';

/*
 * A fake Hub over real HTTP: it answers with the JSON shapes huggingface.co returns (trimmed) and
 * records every request, so the tests check both the query sent and the text the model gets back.
 */

const models = [
  {
    _id: '66e6d2b3a1',
    id: 'Qwen/Qwen2.5-0.5B-Instruct',
    likes: 412,
    trendingScore: 12,
    private: false,
    downloads: 1_873_455,
    tags: [
      'transformers',
      'safetensors',
      'qwen2',
      'text-generation',
      'conversational',
      'en',
      'license:apache-2.0',
    ],
    pipeline_tag: 'text-generation',
    library_name: 'transformers',
    createdAt: '2024-09-16T11:55:40.000Z',
    modelId: 'Qwen/Qwen2.5-0.5B-Instruct',
  },
  {
    _id: '66e6d2b3a2',
    id: 'Qwen/Qwen2.5-7B-Instruct',
    likes: 815,
    private: false,
    downloads: 1_204_000,
    tags: ['transformers', 'safetensors', 'qwen2', 'text-generation'],
    pipeline_tag: 'text-generation',
    library_name: 'transformers',
    safetensors: { parameters: { BF16: 7_615_616_512 }, total: 7_615_616_512 },
  },
  // An older repo: no pipeline tag, no library, gated, odd extra fields.
  {
    _id: '5f1',
    id: 'someone/qwen-lora-adapter',
    likes: 3,
    downloads: 57,
    gated: 'manual',
    tags: null,
    extra: [1],
  },
];

const datasets = [
  {
    _id: '621ffdd2',
    id: 'openai/gsm8k',
    author: 'openai',
    disabled: false,
    gated: false,
    lastModified: '2024-01-04T12:05:15.000Z',
    likes: 622,
    private: false,
    downloads: 412_931,
    tags: [
      'task_categories:text2text-generation',
      'language:en',
      'license:mit',
      'size_categories:1K<n<10K',
      'format:parquet',
    ],
    description:
      'GSM8K (Grade School Math 8K) is a dataset of 8.5K high quality linguistically diverse grade school math word problems.',
  },
  { _id: '6500', id: 'someone/gsm8k-mini', likes: 0, downloads: 12, tags: [] },
];

const modelInfo = {
  _id: '66e6d2b3a1',
  id: 'Qwen/Qwen2.5-0.5B-Instruct',
  modelId: 'Qwen/Qwen2.5-0.5B-Instruct',
  author: 'Qwen',
  sha: '7ae557604adf67be50417f59c2c2f167def9a775',
  lastModified: '2024-09-25T12:32:56.000Z',
  private: false,
  disabled: false,
  gated: false,
  pipeline_tag: 'text-generation',
  tags: [
    'transformers',
    'safetensors',
    'qwen2',
    'text-generation',
    'chat',
    'conversational',
    'en',
    'arxiv:2407.10671',
    'base_model:Qwen/Qwen2.5-0.5B',
    'license:apache-2.0',
    'region:us',
  ],
  downloads: 1_873_455,
  library_name: 'transformers',
  likes: 412,
  cardData: { license: 'apache-2.0', language: ['en'], base_model: 'Qwen/Qwen2.5-0.5B', tags: ['chat'] },
  safetensors: { parameters: { BF16: 494_032_768 }, total: 494_032_768 },
  siblings: [{ rfilename: 'config.json' }, { rfilename: 'model.safetensors' }],
  spaces: [],
};

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

const recorded: Array<{ path: string; query: URLSearchParams; authorization: string | undefined }> = [];
let override: Handler | undefined;
let server: Server;
let baseUrl: string;

function sendJson(response: ServerResponse, status: number, body: unknown) {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

beforeAll(async () => {
  server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://localhost');
    recorded.push({
      path: url.pathname,
      query: url.searchParams,
      authorization: request.headers.authorization,
    });
    if (override !== undefined) return override(request, response);
    const limit = Number(url.searchParams.get('limit') ?? '100');
    if (url.pathname === '/api/models') {
      const task = url.searchParams.get('pipeline_tag');
      const matching = models.filter((model) => task === null || model.pipeline_tag === task);
      return sendJson(response, 200, matching.slice(0, limit));
    }
    if (url.pathname === '/api/datasets') return sendJson(response, 200, datasets.slice(0, limit));
    // @huggingface/hub's modelInfo asks for the HEAD revision.
    if (url.pathname === '/api/models/Qwen/Qwen2.5-0.5B-Instruct/revision/HEAD')
      return sendJson(response, 200, modelInfo);
    // What huggingface.co answers for an unknown repo without a token.
    return sendJson(response, 401, { error: 'Repository not found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});

afterEach(() => {
  override = undefined;
  recorded.length = 0;
});

afterAll(async () => {
  // Hanging handlers never answer; their sockets (and idle keep-alive ones) go with the server.
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const context = { threadId: 'web:c:t', actor: { id: 'u1', name: 'alice' } };

async function expectHubError(promise: Promise<unknown>, code: string): Promise<HubError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(HubError);
  expect((error as HubError).code).toBe(code);
  expect((error as HubError).name).toBe('HubError');
  return error as HubError;
}

describe('hub client', () => {
  it('searches models with the documented query and keeps the hub order', async () => {
    const client = createHubClient({ baseUrl });
    const found = await client.searchModels({ query: 'qwen', limit: 5, task: 'text-generation' });
    expect(found.map((model) => model.id)).toEqual([
      'Qwen/Qwen2.5-0.5B-Instruct',
      'Qwen/Qwen2.5-7B-Instruct',
    ]);
    expect(found[1]).toMatchObject({ parameters: 7_615_616_512, pipelineTag: 'text-generation', likes: 815 });
    expect(found[0]?.parameters).toBeUndefined();
    const request = recorded[0];
    expect(request?.path).toBe('/api/models');
    expect(request?.query.get('search')).toBe('qwen');
    expect(request?.query.get('limit')).toBe('5');
    expect(request?.query.get('sort')).toBe('downloads');
    expect(request?.query.get('pipeline_tag')).toBe('text-generation');
    // The package asks for the extra fields the tools show (library, tags, safetensors totals).
    expect(request?.query.getAll('expand')).toEqual(
      expect.arrayContaining(['library_name', 'tags', 'safetensors', 'downloads', 'likes']),
    );
    expect(request?.authorization).toBeUndefined();
  });

  it('tolerates missing and unknown fields', async () => {
    const found = await createHubClient({ baseUrl }).searchModels({ query: 'qwen', limit: 10 });
    expect(found[2]).toEqual({
      id: 'someone/qwen-lora-adapter',
      downloads: 57,
      likes: 3,
      pipelineTag: undefined,
      libraryName: undefined,
      tags: [],
      parameters: undefined,
      gated: true,
    });
    expect(recorded[0]?.query.has('pipeline_tag')).toBe(false);
  });

  it('reads model details with parameters and card license, and sends the token', async () => {
    const client = createHubClient({ baseUrl, token: 'hf_secret_token_123' });
    const model = await client.getModel('Qwen/Qwen2.5-0.5B-Instruct');
    expect(model).toMatchObject({
      id: 'Qwen/Qwen2.5-0.5B-Instruct',
      parameters: 494_032_768,
      parametersByDtype: { BF16: 494_032_768 },
      license: 'apache-2.0',
      baseModels: ['Qwen/Qwen2.5-0.5B'],
      libraryName: 'transformers',
    });
    expect(recorded[0]?.path).toBe('/api/models/Qwen/Qwen2.5-0.5B-Instruct/revision/HEAD');
    expect(recorded[0]?.query.getAll('expand')).toEqual(expect.arrayContaining(['cardData', 'safetensors']));
    expect(recorded[0]?.authorization).toBe('Bearer hf_secret_token_123');
  });

  it('never logs the token', async () => {
    let logged = '';
    const sink = new Writable({
      write(chunk, _encoding, done) {
        logged += String(chunk);
        done();
      },
    });
    const logger = pino({ level: 'trace' }, sink);
    const client = createHubClient({ baseUrl, token: 'hf_secret_token_123', logger });
    await client.searchDatasets({ query: 'gsm8k', limit: 2 });
    await client.getModel('nobody/missing').catch(() => undefined);
    expect(logged).toContain('hub request');
    expect(logged).not.toContain('hf_secret_token_123');
  });

  it('turns a 500 into hub_http with the status', async () => {
    override = (_request, response) => sendJson(response, 500, { error: 'Internal Error' });
    const error = await expectHubError(
      createHubClient({ baseUrl }).searchModels({ query: 'qwen', limit: 3 }),
      'hub_http',
    );
    expect(error.status).toBe(500);
    expect(error.message).toContain('HTTP 500: Internal Error');
  });

  it('turns a body that is not JSON into hub_bad_response', async () => {
    override = (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end('[{"id": "Qwen/Qw');
    };
    await expectHubError(
      createHubClient({ baseUrl }).searchDatasets({ query: 'x', limit: 3 }),
      'hub_bad_response',
    );
  });

  it('turns JSON of the wrong shape into hub_bad_response', async () => {
    override = (_request, response) => sendJson(response, 200, { models: [] });
    await expectHubError(
      createHubClient({ baseUrl }).searchModels({ query: 'x', limit: 3 }),
      'hub_bad_response',
    );
  });

  it('turns a refused connection into hub_network', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const error = await expectHubError(
      createHubClient({ baseUrl: `http://127.0.0.1:${port}` }).searchModels({ query: 'x', limit: 3 }),
      'hub_network',
    );
    expect(error.message).toContain(`127.0.0.1:${port}`);
  });

  it('turns a hang into hub_timeout', async () => {
    override = () => undefined;
    const started = Date.now();
    await expectHubError(
      createHubClient({ baseUrl, timeoutMs: 200 }).getModel('Qwen/Qwen2.5-0.5B-Instruct'),
      'hub_timeout',
    );
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('times out a body that stops half way', async () => {
    override = (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('[{"id": ');
    };
    await expectHubError(
      createHubClient({ baseUrl, timeoutMs: 200 }).searchModels({ query: 'x', limit: 3 }),
      'hub_timeout',
    );
  });

  it('refuses an id that could change the request path, without a request', async () => {
    await expectHubError(createHubClient({ baseUrl }).getModel('../../api/whoami-v2'), 'hub_invalid_id');
    expect(recorded).toHaveLength(0);
  });
});

describe('hub tools through the registry', () => {
  const registry = () => createToolRegistry(createHubTools(createHubClient({ baseUrl, timeoutMs: 500 })));

  it('are listed with described inputs', () => {
    const tools = registry();
    expect(tools.specs().map((item) => item.name)).toEqual([
      'search_models',
      'search_datasets',
      'get_model_info',
    ]);
    const spec = tools.specs().find((item) => item.name === 'search_models');
    expect(spec?.parameters).toMatchObject({
      required: ['query'],
      properties: {
        limit: { minimum: 1, maximum: 20, default: 8 },
        task: { description: expect.any(String) },
      },
    });
  });

  it('search_models answers one compact line per model, default limit 8', async () => {
    const result = await registry().execute(
      {
        id: 'c1',
        name: 'search_models',
        arguments: JSON.stringify({ query: 'qwen', task: 'text-generation' }),
      },
      context,
    );
    expect(result.isError).toBe(false);
    expect(result.content.split('\n')).toEqual([
      '2 models matching "qwen" for task text-generation, most downloaded first:',
      'Qwen/Qwen2.5-0.5B-Instruct · 1.9M downloads · 412 likes · text-generation · transformers',
      'Qwen/Qwen2.5-7B-Instruct · 1.2M downloads · 815 likes · text-generation · 7.6B params · transformers',
    ]);
    expect(recorded[0]?.query.get('limit')).toBe('8');
  });

  it('search_datasets shows task and size categories', async () => {
    const result = await registry().execute(
      { id: 'c1', name: 'search_datasets', arguments: JSON.stringify({ query: 'gsm8k', limit: 2 }) },
      context,
    );
    expect(result.content.split('\n')).toEqual([
      '2 datasets matching "gsm8k", most downloaded first:',
      'openai/gsm8k · 412.9K downloads · 622 likes · text2text-generation · size 1K<n<10K',
      'someone/gsm8k-mini · 12 downloads · 0 likes',
    ]);
    expect(recorded[0]?.path).toBe('/api/datasets');
  });

  it('says plainly when nothing matches', async () => {
    override = (_request, response) => sendJson(response, 200, []);
    const result = await registry().execute(
      { id: 'c1', name: 'search_models', arguments: JSON.stringify({ query: 'zzz' }) },
      context,
    );
    expect(result).toEqual({
      isError: false,
      content: 'No models on the hub match "zzz". Try fewer or different words.',
    });
  });

  it('get_model_info gives size, license and base model', async () => {
    const result = await registry().execute(
      {
        id: 'c1',
        name: 'get_model_info',
        arguments: JSON.stringify({ model_id: 'Qwen/Qwen2.5-0.5B-Instruct' }),
      },
      context,
    );
    expect(result.isError).toBe(false);
    expect(result.content).toContain('parameters: 494M (494032768) BF16');
    expect(result.content).toContain('license: apache-2.0');
    expect(result.content).toContain('base model: Qwen/Qwen2.5-0.5B');
    expect(result.content).toContain('task: text-generation · library: transformers');
    expect(result.content).not.toContain('arxiv:');
  });

  it('an invalid limit is an error result and reaches no hub', async () => {
    const result = await registry().execute(
      { id: 'c1', name: 'search_models', arguments: JSON.stringify({ query: 'qwen', limit: 50 }) },
      context,
    );
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/^Error: invalid arguments for search_models: limit:/);
    expect(recorded).toHaveLength(0);
  });

  it('a hub failure becomes an error result with a clear sentence', async () => {
    override = (_request, response) => sendJson(response, 503, { error: 'Service Unavailable' });
    const result = await registry().execute(
      { id: 'c1', name: 'search_models', arguments: JSON.stringify({ query: 'qwen' }) },
      context,
    );
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(
      /^Error: the model hub is unreachable right now \(.*HTTP 503.*\); I cannot search models$/,
    );
  });

  it('an unreachable hub becomes an error result, not a crash', async () => {
    const tools = createToolRegistry(createHubTools(createHubClient({ baseUrl: 'http://127.0.0.1:1' })));
    const result = await tools.execute(
      { id: 'c1', name: 'search_datasets', arguments: JSON.stringify({ query: 'gsm8k' }) },
      context,
    );
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(
      /^Error: the model hub is unreachable right now \(cannot reach .*\); I cannot search datasets$/,
    );
  });

  it('an unknown model points the agent at search_models', async () => {
    const result = await registry().execute(
      { id: 'c1', name: 'get_model_info', arguments: JSON.stringify({ model_id: 'nobody/missing' }) },
      context,
    );
    expect(result.isError).toBe(true);
    expect(result.content).toContain('the hub has no public model "nobody/missing" (HTTP 401)');
    expect(result.content).toContain('search_models');
  });
});

describe('formatCount', () => {
  it('is compact', () => {
    expect([
      formatCount(57),
      formatCount(412_931),
      formatCount(1_873_455),
      formatCount(7_615_616_512),
    ]).toEqual(['57', '412.9K', '1.9M', '7.6B']);
  });
});
