import { listFiles } from '@huggingface/hub';
import { z } from 'zod';
import { errorMessage, ResearchError } from '../errors.js';
import type { HubRevisions } from '../tools/hub-revisions.js';
import { hubRepoIdPattern } from '../tools/hub-types.js';
import { defineTool, type ToolDefinition } from '../tools/registry.js';
import { PAGE_CHARS } from './docs-tools.js';
import { headAndTail } from './page-text.js';
import type { ResearchSession } from './research-session.js';

/**
 * The sub-agent's Hub file tools, for READMEs (model and dataset cards), `config.json` and the like:
 * `hub_repo_files` lists a repo through @huggingface/hub's `listFiles`, `hub_read_file` reads one
 * small file from its `resolve/main` URL. Both go through the research session (cache and guarded
 * fetch), so a redirect off the Hub (large LFS files on a CDN) is refused rather than followed.
 */

const repoType = z.enum(['model', 'dataset', 'space']).default('model').describe('model, dataset or space');
const repoId = z.string().max(200).regex(hubRepoIdPattern, 'a hub id like "Qwen/Qwen2.5-0.5B"');
const filePath = z
  .string()
  .min(1)
  .max(300)
  .regex(/^[^?#]*$/)
  .refine((path) => !path.split('/').includes('..'), 'no ".." segments');

/** The URL prefix of a repo's files: models at the root, datasets and spaces under their kind. */
const resolvePrefix = (type: 'model' | 'dataset' | 'space') => (type === 'model' ? '' : `${type}s/`);

export function createHubFileTools(
  session: ResearchSession,
  hubToken: string | undefined,
  revisions?: HubRevisions,
): ToolDefinition[] {
  const { hubUrl } = session.endpoints;
  const authorization: Record<string, string> =
    hubToken === undefined ? {} : { authorization: `Bearer ${hubToken}` };

  /** The commit of the repo's `main`, kept for the thread's next launch record; best effort. */
  async function recordRevision(threadId: string, type: 'model' | 'dataset' | 'space', repo: string) {
    if (revisions === undefined || type === 'space') return undefined;
    try {
      const answer = await session.get(`${hubUrl}/api/${type}s/${repo}/revision/main`, {
        accept: 'application/json',
        ...authorization,
      });
      if (answer.status < 200 || answer.status >= 300) return undefined;
      const parsed = z
        .object({ sha: z.string().regex(/^[0-9a-f]{7,64}$/) })
        .safeParse(JSON.parse(answer.text));
      if (!parsed.success) return undefined;
      await revisions.record(threadId, [{ kind: type, repo, sha: parsed.data.sha, via: 'hub_repo_files' }]);
      return parsed.data.sha;
    } catch {
      return undefined;
    }
  }

  // The package's fetch, served by the session: cached per thread and only to the allowed bases.
  const sessionFetch = async (input: string | URL | Request): Promise<Response> => {
    const url = input instanceof Request ? input.url : String(input);
    const answer = await session.get(url, { accept: 'application/json', ...authorization });
    return new Response(answer.text, {
      status: answer.status,
      headers: { 'content-type': answer.contentType },
    });
  };
  return [
    defineTool({
      name: 'hub_repo_files',
      description:
        'List the files of a Hugging Face Hub model, dataset or space (path and size), to find its README, config.json or scripts.',
      input: z.object({ repo: repoId, type: repoType }),
      async execute(input, context) {
        const files: Array<{ path: string; size: number; type: string }> = [];
        try {
          for await (const entry of listFiles({
            repo: { type: input.type, name: input.repo },
            hubUrl,
            fetch: sessionFetch,
            recursive: true,
          })) {
            files.push(entry);
            if (files.length >= 200) break;
          }
        } catch (error) {
          if (error instanceof ResearchError) throw error;
          throw new ResearchError(
            'fetch_failed',
            `cannot list ${input.type} ${input.repo}: ${errorMessage(error)}`,
            { cause: error },
          );
        }
        const sha = await recordRevision(context.threadId, input.type, input.repo);
        session.addSource({
          url: `${hubUrl}/${resolvePrefix(input.type)}${input.repo}`,
          version: sha ?? 'main',
        });
        if (files.length === 0) return `${input.type} ${input.repo} has no files.`;
        return [
          `${input.type} ${input.repo} (main${sha === undefined ? '' : ` at ${sha}`}), ${files.length} entries:`,
          ...files.map(
            (file) => `- ${file.path}${file.type === 'directory' ? '/' : ` (${file.size} bytes)`}`,
          ),
        ].join('\n');
      },
    }),
    defineTool({
      name: 'hub_read_file',
      description: `Read one text file of a Hub repo (README.md, config.json, a script), cut to ${PAGE_CHARS} characters.`,
      input: z.object({
        repo: repoId,
        path: filePath.describe('e.g. README.md or config.json'),
        type: repoType,
      }),
      async execute(input) {
        const url = `${hubUrl}/${resolvePrefix(input.type)}${input.repo}/resolve/main/${input.path.split('/').map(encodeURIComponent).join('/')}`;
        const answer = await session.get(url, authorization);
        if (answer.status < 200 || answer.status >= 300)
          return `${url} answered HTTP ${answer.status}; nothing read.`;
        session.addSource({ url, version: 'main' });
        session.noteVersions(answer.text);
        return `${input.type} ${input.repo}: ${input.path} (main)\n\n${headAndTail(answer.text, PAGE_CHARS)}`;
      },
    }),
  ];
}
