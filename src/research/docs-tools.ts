import { z } from 'zod';
import { ResearchError, ToolPolicyError } from '../errors.js';
import { defineTool, type ToolDefinition } from '../tools/registry.js';
import { refusalReason } from './guarded-fetch.js';
import { headAndTail, htmlToText, looksLikeHtml } from './page-text.js';
import { docsVersion, type ResearchSession } from './research-session.js';

/**
 * The sub-agent's documentation and papers tools, over the Hub: `docs_search` (the Hub's docs search,
 * `GET /api/docs/search?q=&product=`), `docs_fetch` (a page under the allowed bases, as text),
 * `papers_search` (`GET /api/papers/search?q=`) and `paper_read` (`GET /api/papers/{id}`).
 */

/** A fetched page reaches the sub-agent cut to this many characters (head and tail). */
export const PAGE_CHARS = 12_000;

// Shapes as hf-mcp-server reads them (packages/mcp/src/docs-search/docs-semantic-search.ts, paper-search.ts).
const docHitSchema = z.object({
  text: z.string().catch(''),
  product: z.string().catch(''),
  heading1: z.string().nullish(),
  heading2: z.string().nullish(),
  source_page_url: z.string(),
  source_page_title: z.string().nullish(),
});
const authorSchema = z.object({ name: z.string().nullish() });
const paperSchema = z.object({
  id: z.string(),
  title: z.string().nullish(),
  summary: z.string().nullish(),
  publishedAt: z.string().nullish(),
  authors: z.array(authorSchema).nullish().catch(undefined),
  githubRepo: z.string().nullish(),
  upvotes: z.number().nullish(),
});
const paperHitSchema = z.object({ paper: paperSchema });

function parseAnswer<Schema extends z.ZodType>(
  schema: Schema,
  value: unknown,
  what: string,
): z.output<Schema> {
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    throw new ResearchError('bad_response', `unexpected ${what}: ${parsed.error.issues[0]?.message ?? ''}`);
  return parsed.data;
}

const oneLine = (text: string, limit: number) => {
  const flat = text
    .replace(/<[^>]*>/g, '')
    .replace(/\s+/g, ' ')
    .trim();
  return flat.length <= limit ? flat : `${flat.slice(0, limit)}…`;
};

function authorsLine(authors: Array<{ name?: string | null | undefined }> | null | undefined): string {
  const names = (authors ?? []).map((author) => author.name ?? '').filter((name) => name !== '');
  return names.length <= 6
    ? names.join(', ')
    : `${names.slice(0, 6).join(', ')} and ${names.length - 6} more`;
}

export function createDocsTools(session: ResearchSession): ToolDefinition[] {
  const { hubUrl } = session.endpoints;
  return [
    defineTool({
      name: 'docs_search',
      description:
        "Search the Hugging Face documentation (transformers, trl, peft, accelerate, datasets, hub…). Returns matching excerpts with each page's URL; read a whole page with docs_fetch.",
      input: z.object({
        query: z
          .string()
          .trim()
          .min(3)
          .max(200)
          .describe('What to look for, e.g. "GRPOTrainer reward functions"'),
        library: z
          .string()
          .regex(/^[a-z0-9-]{1,40}$/)
          .optional()
          .describe('Only this product\'s docs, e.g. "trl", "transformers", "peft"'),
      }),
      async execute(input) {
        const url = new URL(`${hubUrl}/api/docs/search`);
        url.searchParams.set('q', input.query.toLowerCase());
        if (input.library !== undefined) url.searchParams.set('product', input.library);
        const hits = parseAnswer(
          z.array(docHitSchema),
          await session.getJson(url.toString()),
          'docs search answer',
        );
        if (hits.length === 0)
          return `No documentation matches "${input.query}"${input.library ? ` in ${input.library}` : ''}.`;
        const lines = [`${hits.length} excerpts for "${input.query}":`];
        for (const hit of hits.slice(0, 10)) {
          const version = docsVersion(hit.source_page_url);
          session.addSource({ url: hit.source_page_url, ...(version === undefined ? {} : { version }) });
          session.noteVersions(hit.text);
          const title = [hit.heading1 ?? hit.source_page_title, hit.heading2].filter(Boolean).join(' › ');
          lines.push(`- [${hit.product}] ${title} — ${hit.source_page_url}\n  ${oneLine(hit.text, 500)}`);
        }
        return lines.join('\n');
      },
    }),
    defineTool({
      name: 'docs_fetch',
      description: `Read one documentation page as text (cut to ${PAGE_CHARS} characters, start and end kept). Only URLs under the Hugging Face Hub, its docs and the GitHub API are fetched.`,
      input: z.object({ url: z.string().max(500).describe('The page URL, e.g. from docs_search') }),
      async execute(input) {
        const { docsUrl, githubApiUrl } = session.endpoints;
        const refused = refusalReason(input.url, [hubUrl, docsUrl, githubApiUrl]);
        // A policy, not a failure: the model should say the page is off limits, not retry it.
        if (refused !== undefined)
          throw new ToolPolicyError('url_outside_sources', `not fetched: ${refused}`);
        const response = await session.get(input.url, { accept: 'text/html,text/markdown,text/plain' });
        if (response.status < 200 || response.status >= 300) {
          return `${input.url} answered HTTP ${response.status}; nothing read.`;
        }
        const text = looksLikeHtml(response.contentType, response.text)
          ? htmlToText(response.text)
          : response.text;
        const version = docsVersion(input.url);
        session.addSource({ url: input.url, ...(version === undefined ? {} : { version }) });
        session.noteVersions(text);
        return `${input.url}${version === undefined ? '' : ` (docs version ${version})`}\n\n${headAndTail(text, PAGE_CHARS)}`;
      },
    }),
    defineTool({
      name: 'papers_search',
      description:
        'Search machine-learning papers on the Hugging Face Hub (title, date, authors, abstract start, id for paper_read).',
      input: z.object({
        query: z.string().trim().min(3).max(200).describe('e.g. "group relative policy optimization"'),
      }),
      async execute(input) {
        const url = new URL(`${hubUrl}/api/papers/search`);
        url.searchParams.set('q', input.query);
        const hits = parseAnswer(
          z.array(paperHitSchema),
          await session.getJson(url.toString()),
          'papers search answer',
        );
        if (hits.length === 0) return `No papers match "${input.query}".`;
        return hits
          .slice(0, 8)
          .map(({ paper }) =>
            [
              `- ${paper.title ?? paper.id} (id ${paper.id}${paper.publishedAt ? `, ${paper.publishedAt.slice(0, 10)}` : ''})`,
              `  ${authorsLine(paper.authors)}`,
              `  ${oneLine(paper.summary ?? '', 300)}`,
            ].join('\n'),
          )
          .join('\n');
      },
    }),
    defineTool({
      name: 'paper_read',
      description:
        "One paper from the Hub's papers API: title, authors, date, abstract and code repository. The API gives the abstract, not the full text.",
      input: z.object({
        id: z
          .string()
          .regex(/^[\w.-]{1,40}$/, 'a paper id like 2402.03300')
          .describe('The paper id (arXiv number)'),
        section: z
          .string()
          .max(80)
          .optional()
          .describe('A section to look for; only the abstract is available'),
      }),
      async execute(input) {
        const url = `${hubUrl}/api/papers/${encodeURIComponent(input.id)}`;
        const paper = parseAnswer(paperSchema, await session.getJson(url), 'paper');
        const page = `${hubUrl}/papers/${paper.id}`;
        session.addSource({ url: page, version: paper.id });
        const sectionNote =
          input.section === undefined || /abstract|summary/i.test(input.section)
            ? []
            : [`(The papers API has no "${input.section}" section; only the abstract is available.)`];
        return [
          `${paper.title ?? paper.id} — ${page}`,
          `Authors: ${authorsLine(paper.authors) || 'not listed'}`,
          ...(paper.publishedAt ? [`Published: ${paper.publishedAt.slice(0, 10)}`] : []),
          ...(paper.githubRepo ? [`Code: ${paper.githubRepo}`] : []),
          ...sectionNote,
          '',
          paper.summary ?? '(no abstract)',
        ].join('\n');
      },
    }),
  ];
}
