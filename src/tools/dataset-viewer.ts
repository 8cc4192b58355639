import { z } from 'zod';
import { definedOnly } from '../defined-only.js';
import { errorMessage } from '../errors.js';
import type { Logger } from '../logger.js';
import { redactSecrets } from '../text/redact.js';
import { checkDatasetFormat, type DatasetChecks, TRAINING_METHODS } from './dataset-format.js';
import type { HubRevisions } from './hub-revisions.js';
import { HubError, hubRepoIdPattern } from './hub-types.js';
import { defineTool, type ToolDefinition } from './registry.js';

/**
 * `inspect_dataset` over the Hugging Face dataset viewer API (`/splits`, `/info`, `/first-rows`):
 * configs and splits, features with their types, row counts and the first rows (long cells cut), so the
 * agent writes the data loading code against the real columns. Gated and private datasets are explained
 * plainly instead of as an HTTP status.
 */

interface DatasetViewerOptions {
  baseUrl: string;
  token?: string | undefined;
  fetch?: typeof fetch;
  timeoutMs?: number;
  logger?: Logger;
}

const MAX_CELL_CHARS = 300;
const MAX_ROWS = 20;

const splitsSchema = z.object({
  splits: z.array(z.object({ config: z.string(), split: z.string() })),
  pending: z.array(z.unknown()).nullish(),
  failed: z.array(z.unknown()).nullish(),
});
const infoSchema = z.object({
  dataset_info: z
    .object({
      description: z.string().nullish(),
      features: z.record(z.string(), z.unknown()).nullish(),
      splits: z
        .record(z.string(), z.object({ num_examples: z.number().nullish(), num_bytes: z.number().nullish() }))
        .nullish(),
    })
    .passthrough(),
  partial: z.boolean().nullish(),
});
const firstRowsSchema = z.object({
  features: z.array(z.object({ name: z.string(), type: z.unknown() })),
  rows: z.array(z.object({ row_idx: z.number(), row: z.record(z.string(), z.unknown()) })),
  truncated: z.boolean().nullish(),
});

/** `{dtype: "string", _type: "Value"}` → `string`; lists, class labels and nested structs in short form. */
export function describeFeatureType(type: unknown, depth = 0): string {
  if (depth > 4) return '…';
  if (Array.isArray(type)) return `list<${describeFeatureType(type[0], depth + 1)}>`;
  if (type === null || typeof type !== 'object') return String(type);
  const record = type as Record<string, unknown>;
  const kind = record._type;
  if (kind === 'Value') return String(record.dtype ?? 'value');
  if (kind === 'ClassLabel') {
    const names = Array.isArray(record.names) ? record.names.map(String) : [];
    return `class label (${names.slice(0, 8).join(', ')}${names.length > 8 ? `, … ${names.length} in all` : ''})`;
  }
  if (kind === 'Sequence' || kind === 'List' || kind === 'LargeList') {
    return `list<${describeFeatureType(record.feature, depth + 1)}>`;
  }
  if (typeof kind === 'string') return kind.toLowerCase();
  const fields = Object.entries(record).map(
    ([name, inner]) => `${name}: ${describeFeatureType(inner, depth + 1)}`,
  );
  return `{${fields.join(', ')}}`;
}

function cutCell(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const flat = (text ?? 'null').replace(/\s+/g, ' ');
  return flat.length > MAX_CELL_CHARS ? `${flat.slice(0, MAX_CELL_CHARS)}… (${flat.length} chars)` : flat;
}

export function createDatasetViewer(options: DatasetViewerOptions) {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const fetchImplementation = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 15_000;

  async function getJson(
    route: string,
    parameters: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<unknown> {
    const url = new URL(`${baseUrl}${route}`);
    for (const [key, value] of Object.entries(parameters)) url.searchParams.set(key, value);
    const where = `${url.origin}${url.pathname}`;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (options.token !== undefined && options.token !== '')
      headers.authorization = `Bearer ${options.token}`;
    const timeout = AbortSignal.timeout(timeoutMs);
    const combined = signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
    let response: Response;
    let text: string;
    try {
      response = await fetchImplementation(url, { headers, signal: combined });
      text = await response.text();
    } catch (error) {
      if (timeout.aborted)
        throw new HubError('hub_timeout', `no answer from ${where} within ${timeoutMs} ms`);
      if (signal?.aborted === true)
        throw new HubError('hub_aborted', `the request to ${where} was cancelled`);
      const cause =
        error instanceof Error && error.cause !== undefined ? ` (${errorMessage(error.cause)})` : '';
      throw new HubError('hub_network', `cannot reach ${where}: ${errorMessage(error)}${cause}`, {
        cause: error,
      });
    }
    options.logger?.debug({ url: where, status: response.status }, 'dataset viewer request');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (!response.ok) {
      const detail =
        body !== null && typeof body === 'object' && typeof (body as { error?: unknown }).error === 'string'
          ? (body as { error: string }).error
          : text.trim().slice(0, 200);
      throw new HubError(
        'hub_http',
        `${where} answered HTTP ${response.status}${detail ? `: ${detail}` : ''}`,
        {
          status: response.status,
        },
      );
    }
    if (body === undefined) throw new HubError('hub_bad_response', `${where} did not answer with JSON`);
    return body;
  }

  function parse<Schema extends z.ZodType>(schema: Schema, body: unknown, what: string): z.output<Schema> {
    const parsed = schema.safeParse(body);
    if (!parsed.success)
      throw new HubError('hub_bad_response', `the dataset viewer sent an unexpected ${what}`);
    return parsed.data;
  }

  return {
    splits: async (dataset: string, signal?: AbortSignal) =>
      parse(splitsSchema, await getJson('/splits', { dataset }, signal), 'split list'),
    info: async (dataset: string, config: string, signal?: AbortSignal) =>
      parse(infoSchema, await getJson('/info', { dataset, config }, signal), 'dataset info'),
    firstRows: async (dataset: string, config: string, split: string, signal?: AbortSignal) =>
      parse(firstRowsSchema, await getJson('/first-rows', { dataset, config, split }, signal), 'first rows'),
  };
}

type DatasetViewer = ReturnType<typeof createDatasetViewer>;

/** What the model reads when the viewer refuses: gated, private or missing, in plain words. */
function explainFailure(error: unknown, dataset: string, hasToken: boolean): Error {
  if (!(error instanceof HubError)) return new Error(`the dataset viewer failed: ${errorMessage(error)}`);
  const message = error.message.toLowerCase();
  if (error.status === 401 || error.status === 403 || error.status === 404) {
    // The viewer's usual 401 text says "private or gated" for anything it cannot see; only an answer
    // about accepting conditions means the dataset exists and is gated.
    if (/accept the conditions|is restricted|gated dataset/.test(message)) {
      return new HubError(
        error.code,
        `${dataset} is gated: its owners ask users to accept their terms on its Hub page first. ${
          hasToken
            ? 'The token Shepherd uses has not been granted access yet; someone with that account must accept the terms on huggingface.co.'
            : 'Shepherd has no Hub token (SHEPHERD_HUB_TOKEN), so it cannot read gated datasets.'
        } Training runs need their own access too (HF_TOKEN in the run).`,
        { status: error.status },
      );
    }
    return new HubError(
      error.code,
      `${dataset} does not exist, or it is private or gated and ${
        hasToken
          ? 'the token Shepherd uses has no access to it'
          : 'Shepherd has no Hub token (SHEPHERD_HUB_TOKEN)'
      }. Check the exact owner/name with search_datasets.`,
      { status: error.status },
    );
  }
  if (error.status === 501) {
    return new HubError(
      error.code,
      `the dataset viewer cannot read ${dataset} (HTTP 501: ${error.message}); it may use a loading script or an unsupported format. The run can still load it with the datasets library.`,
      { status: 501 },
    );
  }
  return new HubError(
    error.code,
    `the dataset viewer failed for ${dataset}: ${error.message}`,
    definedOnly({ status: error.status }),
  );
}

const inspectInput = z.object({
  dataset: z
    .string()
    .trim()
    .max(200)
    .regex(hubRepoIdPattern, 'a hub dataset id like "openai/gsm8k"')
    .describe('Hub dataset id, e.g. openai/gsm8k'),
  config: z
    .string()
    .trim()
    .min(1)
    .max(100)
    .optional()
    .describe('Config (subset) name; default: "default" or the first'),
  split: z
    .string()
    .trim()
    .min(1)
    .max(100)
    .optional()
    .describe('Split for the first rows; default: train or the first'),
  rows: z
    .number()
    .int()
    .min(0)
    .max(MAX_ROWS)
    .default(3)
    .describe('How many first rows to show (0–20, default 3)'),
  method: z
    .enum(TRAINING_METHODS)
    .optional()
    .describe('Training method to check the columns for (sft, dpo, grpo, kto, reward, classification)'),
});

export function createInspectDatasetTool(
  viewer: DatasetViewer,
  options: {
    hasToken: boolean;
    checks?: DatasetChecks;
    /** The commit of the dataset's `main` on the Hub, recorded for the thread's next launch. */
    revisions?: {
      resolve(dataset: string, signal?: AbortSignal): Promise<string | undefined>;
      store: HubRevisions;
    };
  },
): ToolDefinition {
  return defineTool({
    name: 'inspect_dataset',
    description:
      'Look inside a Hugging Face dataset before writing the loading code: its configs and splits, row counts, features (columns) with types, and the first rows (long cells cut). With `method` (sft, dpo, grpo, kto, reward, classification) it checks the columns that method needs and says what is missing and which columns could be mapped; the launch card shows that verdict. Explains gated or private datasets. Use search_datasets first to find the id.',
    input: inspectInput,
    async execute(input, context) {
      try {
        const { splits } = await viewer.splits(input.dataset, context.signal);
        if (splits.length === 0) return `${input.dataset} has no splits the dataset viewer can read yet.`;
        const configs = [...new Set(splits.map((entry) => entry.config))];
        const config = input.config ?? (configs.includes('default') ? 'default' : (configs[0] as string));
        if (!configs.includes(config)) {
          return `${input.dataset} has no config "${config}". Configs: ${configs.slice(0, 30).join(', ')}.`;
        }
        const configSplits = splits.filter((entry) => entry.config === config).map((entry) => entry.split);
        const split = input.split ?? (configSplits.includes('train') ? 'train' : (configSplits[0] as string));
        if (!configSplits.includes(split)) {
          return `${input.dataset} (config ${config}) has no split "${split}". Splits: ${configSplits.join(', ')}.`;
        }
        const [info, first, sha] = await Promise.all([
          viewer.info(input.dataset, config, context.signal).catch(() => undefined),
          viewer.firstRows(input.dataset, config, split, context.signal),
          options.revisions?.resolve(input.dataset, context.signal).catch(() => undefined),
        ]);
        if (sha !== undefined)
          await options.revisions?.store
            .record(context.threadId, [{ kind: 'dataset', repo: input.dataset, sha, via: 'inspect_dataset' }])
            .catch(() => undefined);
        const counts = info?.dataset_info.splits ?? {};
        const lines = [
          `${input.dataset} — config ${config}${configs.length > 1 ? ` (configs: ${configs.slice(0, 12).join(', ')}${configs.length > 12 ? ', …' : ''})` : ''}`,
          `splits: ${configSplits
            .map((name) => {
              const rows = counts[name]?.num_examples;
              return typeof rows === 'number' ? `${name} (${rows.toLocaleString('en')} rows)` : name;
            })
            .join(', ')}`,
          'features:',
          ...first.features.map((feature) => `• ${feature.name}: ${describeFeatureType(feature.type)}`),
        ];
        if (sha !== undefined) lines.splice(1, 0, `revision (main): ${sha}`);
        const rows = first.rows.slice(0, input.rows);
        if (rows.length > 0) {
          lines.push(`first ${rows.length} row${rows.length === 1 ? '' : 's'} of ${split}:`);
          for (const row of rows) {
            lines.push(
              `[${row.row_idx}] ${Object.entries(row.row)
                .map(([name, value]) => `${name}: ${cutCell(value)}`)
                .join(' | ')}`,
            );
          }
        }
        if (input.method !== undefined) {
          // /info has the full feature types; the first rows' list is the fallback.
          const features = info?.dataset_info.features;
          const columns =
            features === undefined || features === null
              ? first.features.map((feature) => ({
                  name: feature.name,
                  type: describeFeatureType(feature.type),
                }))
              : Object.entries(features).map(([name, type]) => ({ name, type: describeFeatureType(type) }));
          const verdict = checkDatasetFormat(input.dataset, input.method, columns);
          lines.push(...verdict.lines);
          await options.checks?.record(context.threadId, verdict.summary);
        }
        lines.push(
          `(More: rows up to ${MAX_ROWS}; other splits with split=…${configs.length > 1 ? ', other configs with config=…' : ''}. Cells over ${MAX_CELL_CHARS} characters are cut.)`,
        );
        return redactSecrets(lines.join('\n'));
      } catch (error) {
        throw explainFailure(error, input.dataset, options.hasToken);
      }
    },
  });
}
