import { createHash, randomBytes } from 'node:crypto';
import { appendFileSync, copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';

/**
 * Model repos for the fake Hub: repo creation, preupload, the LFS batch and basic PUT, and the NDJSON
 * commit, landing on disk under `root/<namespace>/<name>/`. The request and answer shapes are the ones
 * @huggingface/hub 2.17.5 sends and reads (node_modules/@huggingface/hub/dist/index.js: `createRepo`
 * → POST /api/repos/create {name, organization, visibility, type} answered {url, id}; `commitIter` →
 * POST /api/models/<repo>/preupload/<rev> {files: [{path, size, sample}]} answered
 * {files: [{path, uploadMode}]}, POST /<repo>.git/info/lfs/objects/batch (git-lfs batch API,
 * transfers ["basic", "multipart"]) answered {transfer: "basic", objects: [{oid, size, actions: {upload:
 * {href}}}]}, PUT <href> with the bytes, then POST /api/models/<repo>/commit/<rev> as NDJSON lines
 * {key: "header" | "file" | "lfsFile" | "deletedFile", value} answered {commitOid, commitUrl}).
 * An existing repo answers 409 as the Hub does; the namespace `forbidden-org` answers 403.
 */

export interface FakeRepoState {
  root: string;
  /** Commits per repo id, oldest first. */
  commits: Map<string, Array<{ oid: string; summary: string; files: string[] }>>;
  /** Repos created, with their visibility. */
  created: Map<string, string>;
}

/** Files at least this big (or weights by extension) go through LFS, like the Hub's rule for binaries. */
const LFS_MIN_BYTES = 64 * 1024;
const LFS_EXTENSIONS = /\.(safetensors|bin|pt|pth|ckpt|h5)$/;

export function createRepoState(root: string): FakeRepoState {
  return { root, commits: new Map(), created: new Map() };
}

async function body(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function send(response: ServerResponse, status: number, value: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(value));
}

function base(request: IncomingMessage): string {
  return `http://${request.headers.host ?? '127.0.0.1'}`;
}

/** Handles a repo route; false when the request is not one (the caller's other routes answer it). */
export async function handleRepoRoute(
  state: FakeRepoState,
  url: URL,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<boolean> {
  const method = request.method ?? 'GET';
  const write = /^\/api\/(models|repos)\//.test(url.pathname) || url.pathname.includes('.git/info/lfs');
  if (write && method === 'POST' && request.headers.authorization === undefined) {
    send(response, 401, { error: 'Invalid username or password.' });
    return true;
  }
  if (method === 'POST' && url.pathname === '/api/repos/create') {
    const input = JSON.parse((await body(request)).toString('utf8')) as {
      name: string;
      organization: string;
      visibility?: string;
    };
    const repoId = `${input.organization}/${input.name}`;
    if (input.organization === 'forbidden-org') {
      send(response, 403, {
        error: `You don't have the rights to create a model under the namespace "${input.organization}"`,
      });
      return true;
    }
    if (state.created.has(repoId)) {
      send(response, 409, {
        error: 'You already created this model repo',
        url: `${base(request)}/${repoId}`,
      });
      return true;
    }
    mkdirSync(join(state.root, repoId), { recursive: true });
    state.created.set(repoId, input.visibility ?? 'public');
    send(response, 200, { url: `${base(request)}/${repoId}`, name: repoId, id: `id-${repoId}` });
    return true;
  }
  const preupload = /^\/api\/models\/([^/]+\/[^/]+)\/preupload\/([^/]+)$/.exec(url.pathname);
  if (method === 'POST' && preupload !== null) {
    const repoId = preupload[1] as string;
    if (!state.created.has(repoId)) {
      send(response, 404, { error: 'Repository not found' });
      return true;
    }
    const input = JSON.parse((await body(request)).toString('utf8')) as {
      files: Array<{ path: string; size: number }>;
    };
    send(response, 200, {
      files: input.files.map((file) => ({
        path: file.path,
        uploadMode: file.size >= LFS_MIN_BYTES || LFS_EXTENSIONS.test(file.path) ? 'lfs' : 'regular',
        shouldIgnore: false,
      })),
    });
    return true;
  }
  const batch = /^\/([^/]+\/[^/]+)\.git\/info\/lfs\/objects\/batch$/.exec(url.pathname);
  if (method === 'POST' && batch !== null) {
    const input = JSON.parse((await body(request)).toString('utf8')) as {
      objects: Array<{ oid: string; size: number }>;
    };
    response.writeHead(200, { 'content-type': 'application/vnd.git-lfs+json' });
    response.end(
      JSON.stringify({
        transfer: 'basic',
        objects: input.objects.map((object) =>
          existsSync(join(state.root, '.lfs', object.oid))
            ? { ...object, authenticated: true }
            : {
                ...object,
                authenticated: true,
                actions: { upload: { href: `${base(request)}/lfs-upload/${object.oid}`, header: {} } },
              },
        ),
      }),
    );
    return true;
  }
  const upload = /^\/lfs-upload\/([0-9a-f]{64})$/.exec(url.pathname);
  if (method === 'PUT' && upload !== null) {
    const bytes = await body(request);
    const oid = upload[1] as string;
    if (createHash('sha256').update(bytes).digest('hex') !== oid) {
      send(response, 400, { error: 'sha256 does not match the object id' });
      return true;
    }
    mkdirSync(join(state.root, '.lfs'), { recursive: true });
    writeFileSync(join(state.root, '.lfs', oid), bytes);
    response.writeHead(200);
    response.end();
    return true;
  }
  const commit = /^\/api\/models\/([^/]+\/[^/]+)\/commit\/([^/]+)$/.exec(url.pathname);
  if (method === 'POST' && commit !== null) {
    const repoId = commit[1] as string;
    if (!state.created.has(repoId)) {
      send(response, 404, { error: 'Repository not found' });
      return true;
    }
    const lines = (await body(request))
      .toString('utf8')
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as { key: string; value: Record<string, unknown> });
    const files: string[] = [];
    let summary = '';
    for (const { key, value } of lines) {
      if (key === 'header') summary = String(value.summary ?? '');
      if (key !== 'file' && key !== 'lfsFile') continue;
      const target = join(state.root, repoId, String(value.path));
      mkdirSync(dirname(target), { recursive: true });
      if (key === 'file') writeFileSync(target, Buffer.from(String(value.content), 'base64'));
      else {
        const blob = join(state.root, '.lfs', String(value.oid));
        if (!existsSync(blob)) {
          send(response, 422, { error: `LFS object ${String(value.oid)} was never uploaded` });
          return true;
        }
        copyFileSync(blob, target);
      }
      files.push(String(value.path));
    }
    const oid = randomBytes(20).toString('hex');
    const list = state.commits.get(repoId) ?? [];
    list.push({ oid, summary, files });
    state.commits.set(repoId, list);
    appendFileSync(
      join(state.root, repoId, '.commits.jsonl'),
      `${JSON.stringify({ oid, summary, files })}\n`,
    );
    send(response, 200, {
      success: true,
      commitOid: oid,
      commitUrl: `${base(request)}/${repoId}/commit/${oid}`,
    });
    return true;
  }
  return false;
}

/** A file of a repo on disk, as text. */
export function repoFile(state: FakeRepoState, repoId: string, path: string): string {
  return readFileSync(join(state.root, repoId, path), 'utf8');
}
