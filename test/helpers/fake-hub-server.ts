import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRepoState, type FakeRepoState, handleRepoRoute } from './fake-hub-repos.js';

/**
 * A local stand-in for huggingface.co (model info) and datasets-server.huggingface.co (`/splits`,
 * `/info`, `/first-rows`), over real HTTP, answering with the JSON shapes the real services return
 * (trimmed). It records every request so tests can check what was asked and with which token.
 */

export interface FakeHubServer {
  url: string;
  requests: Array<{ path: string; query: URLSearchParams; authorization: string | undefined }>;
  /** Model repos created and committed to through the API, on disk (fake-hub-repos.ts). */
  repos: FakeRepoState;
  close(): Promise<void>;
}

const LONG_QUESTION = `Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. ${'How many clips did Natalia sell altogether in April and May? '.repeat(8)}`;

const gsm8kFeatures = [
  { feature_idx: 0, name: 'question', type: { dtype: 'string', _type: 'Value' } },
  { feature_idx: 1, name: 'answer', type: { dtype: 'string', _type: 'Value' } },
];

const conversation = [
  { content: { dtype: 'string', _type: 'Value' }, role: { dtype: 'string', _type: 'Value' } },
];
const text = { dtype: 'string', _type: 'Value' };

/**
 * More datasets for the format checks, with the features their dataset cards publish (datasets-server
 * `/info` shape: `dataset_info.features` keyed by column; a list of structs is written `[{...}]`, as the
 * viewer answers for `List` features), one config and a train split each.
 */
const DATASET_FIXTURES: Record<
  string,
  { config: string; rows: number; features: Record<string, unknown>; row: Record<string, unknown> }
> = {
  // Preference pairs as whole conversations: DPO's implicit prompt.
  'trl-lib/ultrafeedback_binarized': {
    config: 'default',
    rows: 62135,
    features: {
      chosen: conversation,
      rejected: conversation,
      score_chosen: { dtype: 'float64', _type: 'Value' },
      score_rejected: { dtype: 'float64', _type: 'Value' },
    },
    row: {
      chosen: [
        { content: 'hi', role: 'user' },
        { content: 'hello', role: 'assistant' },
      ],
      rejected: [
        { content: 'hi', role: 'user' },
        { content: 'go away', role: 'assistant' },
      ],
      score_chosen: 8,
      score_rejected: 2,
    },
  },
  // Preference pairs as plain text with the dialogue inside: no prompt column.
  'Anthropic/hh-rlhf': {
    config: 'default',
    rows: 160800,
    features: { chosen: text, rejected: text },
    row: { chosen: '\n\nHuman: hi\n\nAssistant: hello', rejected: '\n\nHuman: hi\n\nAssistant: go away' },
  },
  'HuggingFaceH4/no_robots': {
    config: 'default',
    rows: 9500,
    features: { prompt: text, prompt_id: text, messages: conversation, category: text },
    row: { prompt: 'hi', prompt_id: 'a1', messages: [{ content: 'hi', role: 'user' }], category: 'Chat' },
  },
};

function datasetFixture(url: URL, dataset: string, response: ServerResponse): boolean {
  const fixture = DATASET_FIXTURES[dataset];
  if (fixture === undefined) return false;
  if (url.pathname === '/splits') {
    sendJson(response, 200, {
      splits: [{ dataset, config: fixture.config, split: 'train' }],
      pending: [],
      failed: [],
    });
  } else if (url.pathname === '/info') {
    sendJson(response, 200, {
      dataset_info: {
        description: '',
        config_name: fixture.config,
        features: fixture.features,
        splits: {
          train: {
            name: 'train',
            num_bytes: fixture.rows * 900,
            num_examples: fixture.rows,
            dataset_name: dataset,
          },
        },
      },
      partial: false,
    });
  } else if (url.pathname === '/first-rows') {
    sendJson(response, 200, {
      dataset,
      config: fixture.config,
      split: 'train',
      features: Object.entries(fixture.features).map(([name, type], index) => ({
        feature_idx: index,
        name,
        type,
      })),
      rows: [{ row_idx: 0, row: fixture.row, truncated_cells: [] }],
      truncated: false,
    });
  } else {
    sendJson(response, 404, { error: `no route ${url.pathname}` });
  }
  return true;
}

export const MODEL_SIZES: Record<string, number> = {
  // Published sizes (safetensors totals on the Hub).
  'Qwen/Qwen2.5-0.5B': 494_032_768,
  'meta-llama/Llama-2-7b-hf': 6_738_415_616,
};

/** The commit of each fake repo's main branch (`expand[]=sha`). */
export const HUB_SHAS: Record<string, string> = {
  'Qwen/Qwen2.5-0.5B': '060db6499f32faf8b98477b0a26969ef7d8b9987',
  'meta-llama/Llama-2-7b-hf': '01c7f73d771dfac7d292323805ebc428287df4f9',
  'openai/gsm8k': 'e53f048856ff4f594e959d75785d2c2d37b678ee',
};

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

function handle(url: URL, request: IncomingMessage, response: ServerResponse) {
  const dataset = url.searchParams.get('dataset');
  const config = url.searchParams.get('config');
  const datasetRepo = /^\/api\/datasets\/(.+)\/revision\/HEAD$/.exec(url.pathname)?.[1];
  if (datasetRepo !== undefined) {
    const sha = HUB_SHAS[datasetRepo];
    if (sha === undefined) return sendJson(response, 401, { error: 'Repository not found' });
    // `datasetInfo` of @huggingface/hub (dist/index.js: GET …/revision/HEAD with DATASET_EXPAND_KEYS, and
    // `sha` when asked for): the fields of `ApiDatasetInfo` (types/api/api-dataset.d.ts) it expands.
    return sendJson(response, 200, {
      _id: `d-${datasetRepo}`,
      id: datasetRepo,
      private: false,
      downloads: 0,
      gated: false,
      likes: 0,
      lastModified: '2024-09-25T12:32:56.000Z',
      sha,
    });
  }
  const model = /^\/api\/models\/(.+)\/revision\/HEAD$/.exec(url.pathname)?.[1];
  if (model !== undefined) {
    const total = MODEL_SIZES[model];
    if (total === undefined) return sendJson(response, 401, { error: 'Repository not found' });
    return sendJson(response, 200, {
      _id: `id-${model}`,
      id: model,
      private: false,
      gated: false,
      downloads: 1000,
      likes: 10,
      pipeline_tag: 'text-generation',
      library_name: 'transformers',
      tags: ['transformers', 'safetensors'],
      lastModified: '2024-09-25T12:32:56.000Z',
      safetensors: { parameters: { BF16: total }, total },
      sha: HUB_SHAS[model],
    });
  }
  if (url.pathname === '/api/models') {
    const query = (url.searchParams.get('search') ?? '').toLowerCase();
    const found = Object.entries(MODEL_SIZES).filter(([id]) => id.toLowerCase().includes(query));
    return sendJson(
      response,
      200,
      found.map(([id, total]) => ({
        _id: `id-${id}`,
        id,
        downloads: 1000,
        likes: 10,
        pipeline_tag: 'text-generation',
        library_name: 'transformers',
        tags: ['transformers'],
        safetensors: { total },
        sha: HUB_SHAS[id],
      })),
    );
  }
  if (url.pathname === '/api/datasets') {
    return sendJson(response, 200, [
      { _id: 'd1', id: 'openai/gsm8k', downloads: 412_931, likes: 622, tags: ['size_categories:1K<n<10K'] },
    ]);
  }
  if (dataset === 'someone/gated-accepted-needed') {
    return sendJson(response, 403, {
      error:
        'Access to dataset someone/gated-accepted-needed is restricted. You must be authenticated and accept the conditions (gated dataset).',
    });
  }
  if (dataset !== null && datasetFixture(url, dataset, response)) return;
  if (dataset !== 'openai/gsm8k') {
    return sendJson(response, 404, {
      error:
        'The dataset does not exist, or is not accessible without authentication (private or gated). Please check the spelling of the dataset name or retry with authentication.',
    });
  }
  if (url.pathname === '/splits') {
    return sendJson(response, 200, {
      splits: [
        { dataset, config: 'main', split: 'train' },
        { dataset, config: 'main', split: 'test' },
        { dataset, config: 'socratic', split: 'train' },
        { dataset, config: 'socratic', split: 'test' },
      ],
      pending: [],
      failed: [],
    });
  }
  if (url.pathname === '/info') {
    return sendJson(response, 200, {
      dataset_info: {
        description: '',
        config_name: config,
        features: {
          question: { dtype: 'string', _type: 'Value' },
          answer: { dtype: 'string', _type: 'Value' },
        },
        splits: {
          train: { name: 'train', num_bytes: 3963202, num_examples: 7473, dataset_name: 'gsm8k' },
          test: { name: 'test', num_bytes: 713732, num_examples: 1319, dataset_name: 'gsm8k' },
        },
      },
      partial: false,
    });
  }
  if (url.pathname === '/first-rows') {
    const rows = Array.from({ length: 25 }, (_, index) => ({
      row_idx: index,
      row: {
        question: index === 0 ? LONG_QUESTION : `Question ${index} of ${url.searchParams.get('split')}`,
        answer: `#### ${index * 7}`,
      },
      truncated_cells: [],
    }));
    return sendJson(response, 200, {
      dataset,
      config,
      split: url.searchParams.get('split'),
      features: gsm8kFeatures,
      rows,
      truncated: false,
    });
  }
  sendJson(response, 404, { error: `no route ${request.method} ${url.pathname}` });
}

export async function startFakeHub(): Promise<FakeHubServer> {
  const requests: FakeHubServer['requests'] = [];
  const repos = createRepoState(mkdtempSync(join(tmpdir(), 'shepherd-fake-hub-')));
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://localhost');
    requests.push({
      path: url.pathname,
      query: url.searchParams,
      authorization: request.headers.authorization,
    });
    handleRepoRoute(repos, url, request, response)
      .then((handled) => {
        if (!handled) handle(url, request, response);
      })
      .catch((error: unknown) => sendJson(response, 500, { error: String(error) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    repos,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }).then(() => rmSync(repos.root, { recursive: true, force: true })),
  };
}
