import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Local stand-ins for what the research sub-agent reads, over real HTTP:
 * - the Hub's docs search `GET /api/docs/search?q=&product=` (an array of excerpts with `text`, `product`,
 *   `heading1`, `heading2`, `source_page_url`, `source_page_title`: the shape hf-mcp-server reads in
 *   packages/mcp/src/docs-search/docs-semantic-search.ts), doc pages under `/docs/…` as HTML, and a page
 *   that redirects off the host;
 * - the Hub's papers API `GET /api/papers/search?q=` (`[{paper: {id, title, summary, publishedAt,
 *   authors}}]`) and `GET /api/papers/{id}` (the paper object), as in hf-mcp-server's paper-search.ts and
 *   huggingface_hub's `HfApi.paper_info`;
 * - GitHub's REST API `GET /search/code` (`{total_count, incomplete_results, items: [{name, path, sha,
 *   html_url, repository: {full_name}, text_matches}]}`) and `GET /repos/{owner}/{repo}/contents/{path}`
 *   (a file: `{type: "file", encoding: "base64", content, sha, path, html_url}`; a folder: an array),
 *   from GitHub's REST reference ("Search code", "Get repository content").
 * Every request is recorded; `delayMs` slows one path so a test can watch the status line.
 */

export interface FakeServer {
  url: string;
  requests: Array<{ path: string; query: URLSearchParams; authorization: string | undefined }>;
  /** Delays answers to paths starting with the key. */
  delayMs: Map<string, number>;
  close(): Promise<void>;
}

/** Text that only the raw pages hold: the main agent must never see it. */
export const RAW_DOCS_MARKER = 'RAW-DOCS-EXCERPT-7f3a';
export const RAW_CODE_MARKER = 'RAW-CODE-FRAGMENT-91c2';

export const GRPO_SCRIPT = `from trl import GRPOConfig, GRPOTrainer  # ${RAW_CODE_MARKER}
trainer = GRPOTrainer(model="Qwen/Qwen2.5-0.5B", reward_funcs=reward_len, args=GRPOConfig(output_dir="out"))
trainer.train()
`;

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

function handleHub(base: string, url: URL, response: ServerResponse) {
  if (url.pathname === '/api/docs/search') {
    return sendJson(response, 200, [
      {
        text: `GRPOTrainer takes reward_funcs and a GRPOConfig. ${RAW_DOCS_MARKER} pip install trl==0.19.1`,
        product: 'trl',
        heading1: 'GRPO Trainer',
        heading2: 'Quick start',
        source_page_url: `${base}/docs/trl/v0.19.1/en/grpo_trainer#quick-start`,
        source_page_title: 'GRPO Trainer',
      },
    ]);
  }
  if (url.pathname.startsWith('/docs/redirect-out')) {
    response.writeHead(302, { location: 'http://127.0.0.1:6379/' });
    return void response.end();
  }
  if (url.pathname.startsWith('/docs/')) {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    return void response.end(
      `<!doctype html><html><head><script>var x = 1;</script></head><body><h1>GRPO Trainer</h1><p>${RAW_DOCS_MARKER} &amp; more</p><pre>trainer.train()</pre></body></html>`,
    );
  }
  if (url.pathname === '/api/papers/search') {
    return sendJson(response, 200, [
      {
        paper: {
          id: '2402.03300',
          title: 'DeepSeekMath',
          summary: 'Introduces Group Relative Policy Optimization (GRPO).',
          publishedAt: '2024-02-05T18:55:32.000Z',
          authors: [{ name: 'Zhihong Shao' }],
        },
        numComments: 0,
      },
    ]);
  }
  const paper = /^\/api\/papers\/([\w.-]+)$/.exec(url.pathname)?.[1];
  if (paper === '2402.03300') {
    return sendJson(response, 200, {
      id: paper,
      title: 'DeepSeekMath',
      summary: 'Introduces Group Relative Policy Optimization (GRPO).',
      publishedAt: '2024-02-05T18:55:32.000Z',
      authors: [{ name: 'Zhihong Shao' }],
      upvotes: 100,
    });
  }
  sendJson(response, 404, { error: `no route ${url.pathname}` });
}

function handleGithub(base: string, url: URL, request: IncomingMessage, response: ServerResponse) {
  if (url.pathname === '/search/code') {
    if (request.headers.authorization === undefined)
      return sendJson(response, 401, { message: 'Requires authentication', status: '401' });
    return sendJson(response, 200, {
      total_count: 1,
      incomplete_results: false,
      items: [
        {
          name: 'grpo.py',
          path: 'examples/scripts/grpo.py',
          sha: 'b1946ac92492d2347c6235b4d2611184',
          url: `${base}/repositories/1/contents/examples/scripts/grpo.py`,
          html_url: 'https://github.com/huggingface/trl/blob/0f3a1c2d4e5b/examples/scripts/grpo.py',
          repository: { id: 1, full_name: 'huggingface/trl' },
          score: 1,
          text_matches: [{ fragment: GRPO_SCRIPT }],
        },
      ],
    });
  }
  const file = /^\/repos\/([\w.-]+\/[\w.-]+)\/contents\/(.*)$/.exec(url.pathname);
  if (file?.[1] === 'huggingface/trl' && file[2] === 'examples/scripts/grpo.py') {
    return sendJson(response, 200, {
      type: 'file',
      encoding: 'base64',
      size: GRPO_SCRIPT.length,
      name: 'grpo.py',
      path: 'examples/scripts/grpo.py',
      content: Buffer.from(GRPO_SCRIPT).toString('base64'),
      sha: 'b1946ac92492d2347c6235b4d2611184',
      html_url: 'https://github.com/huggingface/trl/blob/main/examples/scripts/grpo.py',
    });
  }
  sendJson(response, 404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
}

async function startServer(
  handle: (base: string, url: URL, request: IncomingMessage, response: ServerResponse) => void,
): Promise<FakeServer> {
  const requests: FakeServer['requests'] = [];
  const delayMs = new Map<string, number>();
  let base = '';
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://localhost');
    requests.push({
      path: url.pathname,
      query: url.searchParams,
      authorization: request.headers.authorization,
    });
    const delay = [...delayMs.entries()].find(([path]) => url.pathname.startsWith(path))?.[1] ?? 0;
    setTimeout(() => handle(base, url, request, response), delay);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    requests,
    delayMs,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function startFakeDocsHub(): Promise<FakeServer> {
  return startServer((base, url, _request, response) => handleHub(base, url, response));
}

export function startFakeGithub(): Promise<FakeServer> {
  return startServer(handleGithub);
}
