import { loadPrompt } from '../agent/system-prompt.js';
import { createGuardedFetch } from '../research/guarded-fetch.js';
import type { ResearchStore } from '../research/research-store.js';
import { createResearchTool } from '../research/research-tool.js';
import { createHubRevisions } from '../tools/hub-revisions.js';
import { createPlans, createPlanTool, type Plans } from '../tools/plan-tool.js';
import type { ToolDefinition } from '../tools/registry.js';
import type { FeatureBase } from './feature.js';

/**
 * The agent's way of working: `research` (a read-only sub-agent, which also gets the main agent's Hub
 * `lookups`) before writing, and a visible `plan`. Part of the help feature.
 */
export function createResearchTools(
  base: FeatureBase,
  dependencies: { store: ResearchStore; lookups: ToolDefinition[] },
): { tools: ToolDefinition[]; plans: Plans } {
  const { config, logger, redis, prefix, notifier } = base;
  const endpoints = {
    hubUrl: config.hub.url.replace(/\/+$/, ''),
    docsUrl: config.research.docsUrl,
    githubApiUrl: config.research.githubApiUrl,
    githubToken: config.research.githubToken,
  };
  const research = createResearchTool({
    provider: base.provider,
    systemPrompt: loadPrompt('research', config.botName),
    endpoints,
    hubToken: config.hub.token,
    hubRevisions: createHubRevisions({ redis, prefix }),
    store: dependencies.store,
    fetch: createGuardedFetch({
      allowedBases: [endpoints.hubUrl, endpoints.docsUrl, endpoints.githubApiUrl],
      logger: logger.child({ component: 'research-fetch' }),
    }),
    lookupTools: dependencies.lookups,
    defaultBudget: config.research.tokens,
    maxToolRounds: config.llm.maxToolRounds,
    logger,
  });
  const plans = createPlans({ redis, prefix, notifier });
  return { plans, tools: [research, createPlanTool(plans)] };
}
