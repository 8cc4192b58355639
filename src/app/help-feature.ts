import { definedOnly } from '../defined-only.js';
import type { ResearchStore } from '../research/research-store.js';
import type { DatasetChecks } from '../tools/dataset-format.js';
import { createDatasetViewer, createInspectDatasetTool } from '../tools/dataset-viewer.js';
import { createHelpTool } from '../tools/help-tool.js';
import { createHubClient } from '../tools/hub-api.js';
import { createHubRevisions } from '../tools/hub-revisions.js';
import { createHubTools } from '../tools/hub-tools.js';
import { createMemoryTool, type MemoryNotes } from '../tools/memory-tool.js';
import type { Plans } from '../tools/plan-tool.js';
import { createPlaybooks, createReadPlaybookTool, type Playbooks } from '../tools/playbooks.js';
import type { Feature, FeatureBase } from './feature.js';
import { createResearchTools } from './research-feature.js';

interface HelpFeature extends Feature {
  playbooks: Playbooks;
  /** Each thread's visible plan (the `plan` tool). */
  plans: Plans;
  /** The `help` text, as the command answers it. */
  helpText(): Promise<string>;
}

/**
 * What the agent looks up: help, playbooks, the Hub (models, datasets), memory estimates, research (a
 * read-only sub-agent that borrows the Hub lookups), and its visible plan.
 */
export function createHelpFeature(
  base: FeatureBase,
  dependencies: { memoryNotes: MemoryNotes; researchStore: ResearchStore; datasetChecks: DatasetChecks },
): HelpFeature {
  const { config, logger } = base;
  const playbooks = createPlaybooks({ directory: config.session.playbooksDir });
  const help = createHelpTool({ botName: config.botName, playbooks: () => playbooks.describe() });
  const hub = createHubClient({
    baseUrl: config.hub.url,
    token: config.hub.token,
    logger: logger.child({ component: 'hub' }),
  });
  const datasets = createDatasetViewer({
    baseUrl: config.hub.datasetsServerUrl,
    token: config.hub.token,
    logger: logger.child({ component: 'datasets' }),
  });
  const revisions = createHubRevisions({ redis: base.redis, prefix: base.prefix });
  const lookups = [
    ...createHubTools(hub, revisions),
    createInspectDatasetTool(datasets, {
      hasToken: config.hub.token !== undefined,
      checks: dependencies.datasetChecks,
      revisions: {
        resolve: (dataset, signal) => hub.getDatasetSha(dataset, definedOnly({ signal })),
        store: revisions,
      },
    }),
  ];
  const research = createResearchTools(base, { store: dependencies.researchStore, lookups });
  return {
    playbooks,
    plans: research.plans,
    helpText: async () => String(await help.execute({}, { threadId: '', actor: { id: '', name: '' } })),
    actions: [],
    controlHandlers: {},
    tools: [
      help,
      ...lookups,
      ...research.tools,
      createMemoryTool({ hub, notes: dependencies.memoryNotes, gpuMemoryGb: config.checks.gpuMemoryGb }),
      createReadPlaybookTool(playbooks),
    ],
    workers: [],
  };
}
