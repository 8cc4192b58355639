import { z } from 'zod';

/**
 * The research sub-agent (`research` tool): its token budget, and the only places its read-only tools
 * may fetch from (the Hub, the docs, the GitHub API). Everything else is refused, so a fetch tool cannot
 * become a way into the internal network.
 */

const optionalString = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === '' ? undefined : value.trim()));
const baseUrl = z
  .string()
  .url()
  .refine((value) => /^https?:\/\//.test(value), 'must be an http(s) URL')
  .transform((value) => value.replace(/\/+$/, ''));

export const researchEnvironment = {
  SHEPHERD_RESEARCH_TOKENS: z.coerce.number().int().min(1000).default(60_000),
  SHEPHERD_DOCS_URL: baseUrl.default('https://huggingface.co/docs'),
  SHEPHERD_GITHUB_API_URL: baseUrl.default('https://api.github.com'),
  SHEPHERD_GITHUB_TOKEN: optionalString,
};

type ResearchEnvironment = {
  [Name in keyof typeof researchEnvironment]: z.output<(typeof researchEnvironment)[Name]>;
};

export function researchSettings(environment: ResearchEnvironment) {
  return {
    research: {
      /** Tokens (in + out) one `research` call may spend before it returns what it has, marked partial. */
      tokens: environment.SHEPHERD_RESEARCH_TOKENS,
      docsUrl: environment.SHEPHERD_DOCS_URL,
      githubApiUrl: environment.SHEPHERD_GITHUB_API_URL,
      githubToken: environment.SHEPHERD_GITHUB_TOKEN,
    },
  };
}
