import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { type CommitOperation, commitIter, createRepo, HubApiError } from '@huggingface/hub';

/**
 * The upload of a model directory over @huggingface/hub: `createRepo` (private unless asked otherwise; a
 * repo that exists already is reused, so a second push is a new commit), then one `commit` of every file
 * plus the generated README.md. Large files go through the library's LFS path (preupload says which).
 */

interface ModelFile {
  /** Path inside the repo (relative to the model directory, `/`-separated). */
  path: string;
  size: number;
  absolutePath: string;
}

/** Folders deeper than this are left out (the library's own folder walk stops at 5 too). */
const MAX_DEPTH = 5;

/**
 * Every regular file under the model directory, sorted; symlinks and hidden files (`.git`, caches) are
 * skipped. The model's own README.md is replaced by the generated model card.
 */
export async function listModelFiles(directory: string): Promise<ModelFile[]> {
  const files: ModelFile[] = [];
  async function walk(current: string, depth: number): Promise<void> {
    if (depth > MAX_DEPTH) return;
    for (const entry of await readdir(current, { withFileTypes: true })) {
      if (entry.name.startsWith('.')) continue;
      const absolutePath = path.join(current, entry.name);
      if (entry.isDirectory()) await walk(absolutePath, depth + 1);
      else if (entry.isFile()) {
        const relative = path.relative(directory, absolutePath).split(path.sep).join('/');
        if (relative === 'README.md') continue;
        files.push({ path: relative, size: (await lstat(absolutePath)).size, absolutePath });
      }
    }
  }
  await walk(directory, 0);
  return files.sort((a, b) => a.path.localeCompare(b.path));
}

interface UploadRequest {
  hubUrl: string;
  token: string;
  repoId: string;
  private: boolean;
  files: ModelFile[];
  readme: string;
  title: string;
  /** Share of bytes uploaded so far (0..1), on every progress event; the caller throttles. */
  onProgress(fraction: number): void;
}

interface UploadResult {
  url: string;
  commit: string;
  created: boolean;
}

/** Creates the repo when it does not exist (HTTP 409: it does), then commits the files. */
export async function uploadModel(request: UploadRequest): Promise<UploadResult> {
  const credentials = { accessToken: request.token, hubUrl: request.hubUrl };
  let created = true;
  try {
    await createRepo({
      repo: { type: 'model', name: request.repoId },
      visibility: request.private ? 'private' : 'public',
      ...credentials,
    });
  } catch (error) {
    if (!(error instanceof HubApiError && error.statusCode === 409)) throw error;
    created = false;
  }
  const operations: CommitOperation[] = [
    ...request.files.map((file) => ({
      operation: 'addOrUpdate' as const,
      path: file.path,
      // One file per URL: a folder URL would need its trailing slash to land at the repo root.
      content: pathToFileURL(file.absolutePath),
    })),
    { operation: 'addOrUpdate', path: 'README.md', content: new Blob([request.readme]) },
  ];
  const sizes = new Map(request.files.map((file) => [file.path, file.size]));
  const total = request.files.reduce((sum, file) => sum + file.size, 0) + request.readme.length;
  const done = new Map<string, number>();
  const iterator = commitIter({
    repo: { type: 'model', name: request.repoId },
    operations,
    title: request.title,
    // Plain LFS (basic PUT); Xet needs its CAS service, which a mirror or a proxy may not offer.
    useXet: false,
    ...credentials,
  });
  let step = await iterator.next();
  while (!step.done) {
    const event = step.value;
    if (event.event === 'fileProgress' && event.state === 'uploading') {
      done.set(event.path, (sizes.get(event.path) ?? request.readme.length) * event.progress);
      request.onProgress(total === 0 ? 1 : [...done.values()].reduce((a, b) => a + b, 0) / total);
    }
    step = await iterator.next();
  }
  const output = step.value;
  if (output === undefined) throw new Error('the Hub returned no commit');
  return {
    url: `${request.hubUrl.replace(/\/$/, '')}/${request.repoId}`,
    commit: output.commit.oid,
    created,
  };
}

/** The Hub's own words for a failed call (status and message), for the thread. */
export function hubErrorText(error: unknown): string {
  if (error instanceof HubApiError) return `the Hub answered ${error.statusCode}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
