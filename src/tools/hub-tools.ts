import { z } from 'zod';
import { definedOnly } from '../defined-only.js';
import { errorMessage } from '../errors.js';
import type { HubRevisions } from './hub-revisions.js';
import {
  type HubClient,
  type HubDatasetSummary,
  HubError,
  type HubModelInfo,
  type HubModelSummary,
  hubRepoIdPattern,
} from './hub-types.js';
import { defineTool, type ToolDefinition } from './registry.js';

/**
 * The agent's Hugging Face Hub tools, for planning a fine-tune ("fine-tune Qwen on gsm8k"): find a
 * model, find a dataset, check a model's size and license. Results are short text lines, one per
 * repository, so twenty hits cost the model's context a few hundred tokens.
 */

const compact = new Intl.NumberFormat('en', { notation: 'compact', maximumFractionDigits: 1 });

/** 1234567 → "1.2M". */
export function formatCount(value: number): string {
  return compact.format(value);
}

function joinParts(parts: Array<string | undefined | false>): string {
  return parts.filter((part): part is string => typeof part === 'string' && part !== '').join(' · ');
}

/** Tags like `task_categories:text-generation` carry dataset facts; this collects one prefix's values. */
function tagValues(tags: string[], prefix: string): string[] {
  return tags.filter((tag) => tag.startsWith(`${prefix}:`)).map((tag) => tag.slice(prefix.length + 1));
}

/** One model as a line: id · downloads · likes · task · params · library. */
function formatModelLine(model: HubModelSummary): string {
  return joinParts([
    model.id,
    model.downloads !== undefined && `${formatCount(model.downloads)} downloads`,
    model.likes !== undefined && `${formatCount(model.likes)} likes`,
    model.pipelineTag,
    model.parameters !== undefined && `${formatCount(model.parameters)} params`,
    model.libraryName,
    model.gated && 'gated',
  ]);
}

/** One dataset as a line: id · downloads · likes · tasks · size. */
function formatDatasetLine(dataset: HubDatasetSummary): string {
  const tasks = tagValues(dataset.tags, 'task_categories').slice(0, 3).join(', ');
  const size = tagValues(dataset.tags, 'size_categories')[0];
  return joinParts([
    dataset.id,
    dataset.downloads !== undefined && `${formatCount(dataset.downloads)} downloads`,
    dataset.likes !== undefined && `${formatCount(dataset.likes)} likes`,
    tasks,
    size !== undefined && `size ${size}`,
    dataset.gated && 'gated',
  ]);
}

/** A model's details, a few lines. */
function formatModelInfo(model: HubModelInfo): string {
  const dtypes = Object.keys(model.parametersByDtype);
  const lines = [
    model.id,
    `task: ${model.pipelineTag ?? 'unknown'} · library: ${model.libraryName ?? 'unknown'}`,
    `parameters: ${
      model.parameters === undefined
        ? 'unknown (no safetensors metadata)'
        : `${formatCount(model.parameters)} (${model.parameters})${dtypes.length > 0 ? ` ${dtypes.join(', ')}` : ''}`
    }`,
    joinParts([
      model.downloads !== undefined && `downloads (30 days): ${formatCount(model.downloads)}`,
      model.likes !== undefined && `likes: ${formatCount(model.likes)}`,
    ]),
    `license: ${model.license ?? 'not stated'}${model.gated ? ' · gated (accept the terms on the hub; needs a token)' : ''}`,
  ];
  if (model.baseModels.length > 0) lines.push(`base model: ${model.baseModels.slice(0, 3).join(', ')}`);
  if (model.lastModified !== undefined) lines.push(`last modified: ${model.lastModified}`);
  if (model.sha !== undefined) lines.push(`revision (main): ${model.sha}`);
  // Hub tag lists carry dozens of arxiv/region/endpoint tags; a handful is enough to judge the model.
  const tags = model.tags.filter(
    (tag) => !/^(arxiv|region|endpoints_compatible|autotrain_compatible)/.test(tag),
  );
  if (tags.length > 0) lines.push(`tags: ${tags.slice(0, 12).join(', ')}${tags.length > 12 ? ', …' : ''}`);
  return lines.filter((line) => line !== '').join('\n');
}

/** The sentence the model reads when the Hub fails; it says what broke and what the tool could not do. */
export function describeHubFailure(error: unknown, action: string, subject?: string): HubError {
  if (!(error instanceof HubError)) {
    return new HubError(
      'hub_network',
      `the model hub failed unexpectedly (${errorMessage(error)}); I cannot ${action}`,
      {
        cause: error,
      },
    );
  }
  const options = { cause: error, ...definedOnly({ status: error.status }) };
  // The Hub answers 401 (not 404) for a repo that does not exist when no token is sent.
  if (subject !== undefined && (error.status === 404 || error.status === 401 || error.status === 403)) {
    return new HubError(
      error.code,
      `the hub has no public model "${subject}" (HTTP ${error.status}): check the exact owner/name with search_models; if it is private or gated, SHEPHERD_HUB_TOKEN must be set`,
      options,
    );
  }
  const what =
    error.code === 'hub_bad_response'
      ? 'the model hub sent an answer I cannot read'
      : error.code === 'hub_aborted'
        ? 'the hub request was cancelled'
        : 'the model hub is unreachable right now';
  return new HubError(error.code, `${what} (${error.message}); I cannot ${action}`, options);
}

const searchQuery = z
  .string()
  .trim()
  .min(1)
  .max(100)
  .describe('Text the repository id contains, e.g. "Qwen2.5-0.5B" or "gsm8k"; one short term matches best');
const searchLimit = z
  .number()
  .int()
  .min(1)
  .max(20)
  .default(8)
  .describe('How many results, most downloaded first (1–20, default 8)');

const searchModelsInput = z.object({
  query: searchQuery,
  limit: searchLimit,
  task: z
    .string()
    .regex(/^[a-z0-9-]{1,60}$/, 'a hub pipeline tag like "text-generation"')
    .optional()
    .describe(
      'Only models for this pipeline task, e.g. text-generation, text-classification, image-text-to-text',
    ),
});

const searchDatasetsInput = z.object({ query: searchQuery, limit: searchLimit });

const getModelInfoInput = z.object({
  model_id: z
    .string()
    .max(200)
    .regex(hubRepoIdPattern, 'a hub id like "Qwen/Qwen2.5-0.5B"')
    .describe('The exact hub id, owner/name, e.g. Qwen/Qwen2.5-0.5B-Instruct'),
});

/** The shas the Hub answered with, kept for the thread's next launch record. */
async function recordModels(
  revisions: HubRevisions | undefined,
  threadId: string,
  via: string,
  models: readonly HubModelSummary[],
): Promise<void> {
  const resolved = models.flatMap((model) =>
    model.sha === undefined ? [] : [{ kind: 'model' as const, repo: model.id, sha: model.sha, via }],
  );
  // Remembering is a convenience: a Redis hiccup must not fail the lookup.
  await revisions?.record(threadId, resolved).catch(() => undefined);
}

/** `search_models`, `search_datasets` and `get_model_info`, all read-only, over one Hub client. */
export function createHubTools(client: HubClient, revisions?: HubRevisions): ToolDefinition[] {
  return [
    defineTool({
      name: 'search_models',
      description:
        'Search the Hugging Face Hub for models by name, most downloaded first. One line per model: id · downloads · likes · task · parameter count (when known) · library. Use get_model_info for the size and license of a candidate.',
      input: searchModelsInput,
      async execute(input, context) {
        let models: HubModelSummary[];
        try {
          models = await client.searchModels({
            query: input.query,
            limit: input.limit,
            ...definedOnly({ task: input.task, signal: context.signal }),
          });
        } catch (error) {
          throw describeHubFailure(error, 'search models');
        }
        await recordModels(revisions, context.threadId, 'search_models', models);
        const scope = input.task === undefined ? '' : ` for task ${input.task}`;
        if (models.length === 0) {
          return `No models on the hub match "${input.query}"${scope}. Try fewer or different words${input.task === undefined ? '' : ', or no task filter'}.`;
        }
        return [
          `${models.length} models matching "${input.query}"${scope}, most downloaded first:`,
          ...models.map(formatModelLine),
        ].join('\n');
      },
    }),
    defineTool({
      name: 'search_datasets',
      description:
        'Search the Hugging Face Hub for datasets by name, most downloaded first. One line per dataset: id · downloads · likes · task categories · size category.',
      input: searchDatasetsInput,
      async execute(input, context) {
        let datasets: HubDatasetSummary[];
        try {
          datasets = await client.searchDatasets({
            query: input.query,
            limit: input.limit,
            ...definedOnly({ signal: context.signal }),
          });
        } catch (error) {
          throw describeHubFailure(error, 'search datasets');
        }
        if (datasets.length === 0) {
          return `No datasets on the hub match "${input.query}". Try fewer or different words.`;
        }
        return [
          `${datasets.length} datasets matching "${input.query}", most downloaded first:`,
          ...datasets.map(formatDatasetLine),
        ].join('\n');
      },
    }),
    defineTool({
      name: 'get_model_info',
      description:
        'Details of one Hugging Face Hub model: task, library, parameter count, downloads, likes, license, gating, base model and main tags. Use it to size GPUs and check the license before a fine-tune.',
      input: getModelInfoInput,
      async execute(input, context) {
        try {
          const model = await client.getModel(input.model_id, definedOnly({ signal: context.signal }));
          await recordModels(revisions, context.threadId, 'get_model_info', [model]);
          return formatModelInfo(model);
        } catch (error) {
          throw describeHubFailure(error, `read model ${input.model_id}`, input.model_id);
        }
      },
    }),
  ];
}
