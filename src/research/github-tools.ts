import { z } from 'zod';
import { ResearchError } from '../errors.js';
import { defineTool, type ToolDefinition } from '../tools/registry.js';
import { PAGE_CHARS } from './docs-tools.js';
import { headAndTail } from './page-text.js';
import type { ResearchSession } from './research-session.js';

/**
 * The sub-agent's GitHub tools over the REST API (`SHEPHERD_GITHUB_API_URL`): code search
 * (`GET /search/code`), a file (`GET /repos/{owner}/{repo}/contents/{path}`) and a folder listing (the
 * same route on a directory). Shapes from GitHub's REST reference ("Search code", "Get repository
 * content"); working examples in a library's own repository are the best source of current usage.
 */

const repoName = z
  .string()
  .regex(/^[\w.-]{1,100}\/[\w.-]{1,100}$/, 'owner/name, e.g. huggingface/trl')
  .describe('The repository as owner/name, e.g. huggingface/trl');
const repoPath = z
  .string()
  .max(400)
  .regex(/^[^?#]*$/, 'a path inside the repository')
  .refine((path) => !path.split('/').includes('..'), 'no ".." segments');

const searchAnswerSchema = z.object({
  total_count: z.number(),
  items: z.array(
    z.object({
      path: z.string(),
      sha: z.string().nullish(),
      html_url: z.string(),
      repository: z.object({ full_name: z.string() }),
      text_matches: z
        .array(z.object({ fragment: z.string().catch('') }))
        .nullish()
        .catch(undefined),
    }),
  ),
});
const fileSchema = z.object({
  type: z.literal('file'),
  path: z.string(),
  sha: z.string(),
  size: z.number().nullish(),
  encoding: z.string().nullish(),
  content: z.string().nullish(),
  html_url: z.string().nullish(),
});
const entrySchema = z.object({
  type: z.string(),
  name: z.string(),
  path: z.string(),
  size: z.number().nullish(),
});

function parseAnswer<Schema extends z.ZodType>(
  schema: Schema,
  value: unknown,
  what: string,
): z.output<Schema> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ResearchError('bad_response', `unexpected ${what} from GitHub`);
  return parsed.data;
}

const encodePath = (path: string) =>
  path
    .split('/')
    .filter((part) => part !== '')
    .map(encodeURIComponent)
    .join('/');

/** The ref in a `…/blob/<ref>/…` page URL (a commit sha for code search hits). */
const blobRef = (htmlUrl: string) => /\/blob\/([^/]+)\//.exec(htmlUrl)?.[1];

export function createGithubTools(session: ResearchSession): ToolDefinition[] {
  const { githubApiUrl, githubToken } = session.endpoints;
  const headers: Record<string, string> = {
    accept: 'application/vnd.github+json',
    'x-github-api-version': '2022-11-28',
    ...(githubToken === undefined ? {} : { authorization: `Bearer ${githubToken}` }),
  };
  const noTokenHint = githubToken === undefined ? ' (GitHub code search needs SHEPHERD_GITHUB_TOKEN)' : '';

  async function contents(repo: string, path: string, ref: string | undefined): Promise<unknown> {
    const url = new URL(`${githubApiUrl}/repos/${repo}/contents/${encodePath(path)}`);
    if (ref !== undefined) url.searchParams.set('ref', ref);
    return session.getJson(url.toString(), headers);
  }

  return [
    defineTool({
      name: 'github_search_code',
      description:
        "Search code on GitHub (e.g. working examples of a trainer in its library's repository). One line per file with a matching fragment; read a file with github_read_file.",
      input: z.object({
        query: z
          .string()
          .trim()
          .min(2)
          .max(200)
          .describe('Code to look for, e.g. "GRPOTrainer(" or "reward_funcs"'),
        repo: repoName.optional(),
      }),
      async execute(input) {
        const url = new URL(`${githubApiUrl}/search/code`);
        url.searchParams.set(
          'q',
          input.repo === undefined ? input.query : `${input.query} repo:${input.repo}`,
        );
        url.searchParams.set('per_page', '10');
        let answer: unknown;
        try {
          answer = await session.getJson(url.toString(), {
            ...headers,
            accept: 'application/vnd.github.text-match+json',
          });
        } catch (error) {
          if (error instanceof ResearchError && error.status === 401) {
            throw new ResearchError('fetch_failed', `${error.message}${noTokenHint}`, { status: 401 });
          }
          throw error;
        }
        const result = parseAnswer(searchAnswerSchema, answer, 'code search answer');
        if (result.items.length === 0) return `No code on GitHub matches "${input.query}".`;
        const lines = [`${result.total_count} files match; the first ${result.items.length}:`];
        for (const item of result.items) {
          const ref = blobRef(item.html_url);
          session.addSource({
            url: item.html_url,
            ...(ref === undefined ? {} : { version: ref.slice(0, 12) }),
          });
          const fragment = item.text_matches?.[0]?.fragment ?? '';
          session.noteVersions(fragment);
          lines.push(`- ${item.repository.full_name}: ${item.path} — ${item.html_url}`);
          if (fragment !== '') lines.push(`  ${fragment.replace(/\s+/g, ' ').trim().slice(0, 300)}`);
        }
        return lines.join('\n');
      },
    }),
    defineTool({
      name: 'github_read_file',
      description: `Read one file of a GitHub repository (cut to ${PAGE_CHARS} characters, start and end kept).`,
      input: z.object({
        repo: repoName,
        path: repoPath.min(1).describe('The file path, e.g. examples/scripts/grpo.py'),
        ref: z
          .string()
          .regex(/^[\w./-]{1,100}$/)
          .optional()
          .describe('Branch, tag or commit; default branch when omitted'),
      }),
      async execute(input) {
        const file = parseAnswer(fileSchema, await contents(input.repo, input.path, input.ref), 'file');
        const text =
          file.encoding === 'base64'
            ? Buffer.from(file.content ?? '', 'base64').toString('utf8')
            : (file.content ?? '');
        const url = file.html_url ?? `${githubApiUrl}/repos/${input.repo}/contents/${input.path}`;
        const version = input.ref ?? blobRef(url) ?? file.sha.slice(0, 12);
        session.addSource({ url, version });
        session.noteVersions(text);
        return `${input.repo}/${file.path} at ${version} (${url})\n\n${headAndTail(text, PAGE_CHARS)}`;
      },
    }),
    defineTool({
      name: 'github_list_repo',
      description: 'List a folder of a GitHub repository (files and subfolders), to find examples and tests.',
      input: z.object({
        repo: repoName,
        path: repoPath.optional().describe('A folder, e.g. examples/scripts; the root when omitted'),
      }),
      async execute(input) {
        const answer = await contents(input.repo, input.path ?? '', undefined);
        if (!Array.isArray(answer))
          return `${input.path ?? '/'} is a file in ${input.repo}: read it with github_read_file.`;
        const entries = parseAnswer(z.array(entrySchema), answer, 'folder listing');
        return [
          `${input.repo}/${input.path ?? ''} holds ${entries.length} entries:`,
          ...entries
            .slice(0, 100)
            .map(
              (entry) =>
                `- ${entry.type === 'dir' ? `${entry.path}/` : entry.path}${entry.size ? ` (${entry.size} bytes)` : ''}`,
            ),
        ].join('\n');
      },
    }),
  ];
}
