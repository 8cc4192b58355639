import { z } from 'zod';
import { runAgentTurn, type TokenUsage } from '../agent/agent-loop.js';
import type { LlmProvider } from '../agent/llm-provider.js';
import type { Logger } from '../logger.js';
import type { HubRevisions } from '../tools/hub-revisions.js';
import { createToolRegistry, defineTool, type ToolContext, type ToolDefinition } from '../tools/registry.js';
import { createDocsTools } from './docs-tools.js';
import { createGithubTools } from './github-tools.js';
import type { GuardedFetch } from './guarded-fetch.js';
import { createHubFileTools } from './hub-file-tools.js';
import { createResearchSession, type ResearchEndpoints, type ResearchSession } from './research-session.js';
import type { ResearchSource, ResearchStore } from './research-store.js';

/**
 * `research {question, budget_tokens?}`: a sub-agent with its own context and only read-only tools
 * (docs, papers, GitHub, Hub files, the model/dataset search) answers one question about current
 * library usage. The main agent gets back a short summary with the sources really read and the versions
 * found, never the raw pages, so its own context stays small.
 */

interface ResearchToolOptions {
  provider: LlmProvider;
  /** `prompts/research.md`, loaded once. */
  systemPrompt: string;
  endpoints: ResearchEndpoints;
  /** `SHEPHERD_HUB_TOKEN`, for Hub files of private repos. */
  hubToken: string | undefined;
  /** Where `hub_repo_files` keeps the revisions it resolved (for the thread's next launch record). */
  hubRevisions?: HubRevisions;
  store: ResearchStore;
  fetch: GuardedFetch;
  /** The existing lookups the sub-agent may also use (`search_models`, `search_datasets`, `inspect_dataset`). */
  lookupTools: ToolDefinition[];
  /** `SHEPHERD_RESEARCH_TOKENS`: the default budget, and the most a call may ask for. */
  defaultBudget: number;
  maxToolRounds: number;
  logger: Logger;
  /** Told the tokens every research call spent (the thread's LLM spend counts the sub-agent too). */
  onUsage?: (usage: TokenUsage, context: ToolContext) => void | Promise<void>;
}

const researchInput = z.object({
  question: z
    .string()
    .trim()
    .min(5)
    .max(500)
    .describe(
      'One precise question, e.g. "current TRL GRPOTrainer usage: GRPOConfig fields and reward function signature"',
    ),
  budget_tokens: z
    .number()
    .int()
    .min(1000)
    .optional()
    .describe('Tokens the research may spend (default SHEPHERD_RESEARCH_TOKENS, never more)'),
});

const SOURCES_SHOWN = 12;

function formatSources(sources: ResearchSource[]): string[] {
  if (sources.length === 0) return ['Sources: none read.'];
  return [
    'Sources:',
    ...sources
      .slice(0, SOURCES_SHOWN)
      .map(
        (source) => `- ${source.url}${source.version === undefined ? '' : ` (version ${source.version})`}`,
      ),
    ...(sources.length > SOURCES_SHOWN ? [`- … and ${sources.length - SOURCES_SHOWN} more`] : []),
  ];
}

function statusLine(outcome: string, budget: number, usage: TokenUsage): string {
  const used = usage.inputTokens + usage.outputTokens;
  const tokens = `${used} tokens used (${usage.inputTokens} in, ${usage.outputTokens} out) of ${budget}`;
  switch (outcome) {
    case 'answered':
      return `Research complete: ${tokens}.`;
    case 'budget_exhausted':
      return `PARTIAL research: the token budget ran out (${tokens}); below is what was found so far.`;
    case 'max_rounds':
      return `PARTIAL research: stopped after the most tool rounds (${tokens}).`;
    case 'cancelled':
      return `PARTIAL research: cancelled (${tokens}).`;
    default:
      return `PARTIAL research: the model endpoint failed (${tokens}).`;
  }
}

function summaryOf(
  question: string,
  outcome: string,
  reply: string,
  session: ResearchSession,
  budget: number,
  usage: TokenUsage,
): string {
  const versions = session.versions();
  return [
    statusLine(outcome, budget, usage),
    `Question: ${question}`,
    '',
    'Findings:',
    reply.trim() === '' ? '(no written findings)' : reply.trim(),
    '',
    ...formatSources(session.sources()),
    ...(versions.length === 0 ? [] : [`Versions mentioned in the sources: ${versions.join(', ')}.`]),
  ].join('\n');
}

export function createResearchTool(options: ResearchToolOptions): ToolDefinition {
  return defineTool({
    name: 'research',
    description:
      'Research current usage of a library, model, dataset or paper in a separate sub-agent (docs, GitHub examples, papers, Hub files) before writing or changing a training script. Returns a summary with the source URLs and versions found; only the summary enters this conversation.',
    input: researchInput,
    async execute(input, context) {
      const budget = Math.min(input.budget_tokens ?? options.defaultBudget, options.defaultBudget);
      const headline = `researching: ${input.question.length > 80 ? `${input.question.slice(0, 80)}…` : input.question}`;
      await context.progress?.(headline);
      const session = createResearchSession({
        threadId: context.threadId,
        endpoints: options.endpoints,
        store: options.store,
        fetch: options.fetch,
        signal: context.signal,
      });
      const registry = createToolRegistry([
        ...createDocsTools(session),
        ...createGithubTools(session),
        ...createHubFileTools(session, options.hubToken, options.hubRevisions),
        ...options.lookupTools,
      ]);
      const logger = options.logger.child({ threadId: context.threadId, component: 'research' });
      const result = await runAgentTurn({
        provider: options.provider,
        registry,
        systemPrompt: options.systemPrompt,
        history: [
          { role: 'user', author: 'system', content: `Question from the main agent: ${input.question}` },
        ],
        context: {
          threadId: context.threadId,
          actor: context.actor,
          ...(context.signal === undefined ? {} : { signal: context.signal }),
        },
        maxToolRounds: options.maxToolRounds,
        tokenBudget: budget,
        // "running tool docs_search…" becomes "researching: <question> — docs_search…" on the status line.
        onProgress: (status) =>
          context.progress?.(
            status.startsWith('running tool ') ? `${headline} — ${status.slice(13)}` : headline,
          ),
        logger,
      });
      await options.onUsage?.(result.usage, context);
      const sources = session.sources();
      if (sources.length > 0) await options.store.saveSources(context.threadId, sources);
      logger.info({ outcome: result.outcome, usage: result.usage, sources: sources.length }, 'research done');
      // A sub-agent stopped by rounds, a cancel or the endpoint still leaves its notes so far.
      const findings =
        result.outcome === 'answered' || result.outcome === 'budget_exhausted'
          ? result.reply
          : result.newMessages
              .slice(0, -1)
              .filter((message) => message.role === 'assistant' && message.content.trim() !== '')
              .map((message) => message.content)
              .join('\n');
      return summaryOf(input.question, result.outcome, findings, session, budget, result.usage);
    },
  });
}
