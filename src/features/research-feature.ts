import { loadPrompt } from '../agent/system-prompt.js';
import { createGuardedFetch } from '../research/guarded-fetch.js';
import type { ResearchStore } from '../research/research-store.js';
import { createResearchTool } from '../research/research-tool.js';
import { createPlans, createPlanTool, type Plans } from '../tools/plan-tool.js';
import type { ToolDefinition } from '../tools/registry.js';
import type { Feature, FeatureBase } from './feature.js';

interface ResearchFeature extends Feature {
  plans: Plans;
}

/** Tools the research sub-agent borrows from the main agent: the read-only Hub lookups. */
const LOOKUP_TOOLS = new Set(['search_models', 'search_datasets', 'inspect_dataset', 'get_model_info']);

/** The agent's way of working: `research` (a read-only sub-agent) before writing, and a visible `plan`. */
export function createResearchFeature(
  base: FeatureBase,
  dependencies: { store: ResearchStore; tools: readonly ToolDefinition[] },
): ResearchFeature {
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
    store: dependencies.store,
    fetch: createGuardedFetch({
      allowedBases: [endpoints.hubUrl, endpoints.docsUrl, endpoints.githubApiUrl],
      logger: logger.child({ component: 'research-fetch' }),
    }),
    lookupTools: dependencies.tools.filter((tool) => LOOKUP_TOOLS.has(tool.name)),
    defaultBudget: config.research.tokens,
    maxToolRounds: config.llm.maxToolRounds,
    logger,
  });
  const plans = createPlans({ redis, prefix, notifier });
  return {
    plans,
    actions: [],
    controlHandlers: {},
    tools: [research, createPlanTool(plans)],
    workers: [],
  };
}
