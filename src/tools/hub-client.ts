import { z } from 'zod';
import { BotError, errorMessage } from '../errors.js';
import type { Logger } from '../logger.js';

/**
 * A small client for the public Hugging Face Hub HTTP API (search models and datasets, read one
 * model's details). Every failure becomes a `HubError`; raw fetch errors never escape.
 */

export type HubErrorCode =
  | 'hub_http'
  | 'hub_network'
  | 'hub_timeout'
  | 'hub_bad_response'
  | 'hub_aborted'
  | 'hub_invalid_id';

/** A Hub call failed. `status` is set for `hub_http` (the HTTP status the Hub answered). */
export class HubError extends BotError {
  override readonly code: HubErrorCode;
  readonly status: number | undefined;
  constructor(code: HubErrorCode, message: string, options: { status?: number; cause?: unknown } = {}) {
    super(code, message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'HubError';
    this.code = code;
    this.status = options.status;
  }
}

export interface HubModelSummary {
  id: string;
  downloads: number | undefined;
  likes: number | undefined;
  pipelineTag: string | undefined;
  libraryName: string | undefined;
  tags: string[];
  /** Total parameter count, when the Hub knows it (`safetensors.total`). */
  parameters: number | undefined;
  gated: boolean;
}

export interface HubModelInfo extends HubModelSummary {
  license: string | undefined;
  /** `cardData.base_model`: what this model was fine-tuned or quantised from. */
  baseModels: string[];
  /** Parameter count per dtype (`safetensors.parameters`), e.g. `{ BF16: 494032768 }`. */
  parametersByDtype: Record<string, number>;
  lastModified: string | undefined;
}

export interface HubDatasetSummary {
  id: string;
  downloads: number | undefined;
  likes: number | undefined;
  tags: string[];
  gated: boolean;
  description: string | undefined;
}

export interface HubClient {
  searchModels(options: {
    query: string;
    limit: number;
    task?: string;
    signal?: AbortSignal;
  }): Promise<HubModelSummary[]>;
  searchDatasets(options: {
    query: string;
    limit: number;
    signal?: AbortSignal;
  }): Promise<HubDatasetSummary[]>;
  getModel(modelId: string, options?: { signal?: AbortSignal }): Promise<HubModelInfo>;
}

export interface HubClientOptions {
  /** e.g. `https://huggingface.co` or a mirror. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer …` (private and gated repos); never logged. */
  token?: string | undefined;
  fetch?: typeof fetch;
  /** Covers the whole call, headers and body. Default 10 s. */
  timeoutMs?: number;
  logger?: Logger;
}

/** Hub ids are `name` or `owner/name`; one pattern keeps tool input from steering the request path. */
export const hubRepoIdPattern = /^[A-Za-z0-9][A-Za-z0-9._-]*(?:\/[A-Za-z0-9][A-Za-z0-9._-]*)?$/;

// Lenient schemas: the Hub adds fields freely and omits many on older repos, so only `id` is required.
const count = z.number().nonnegative().nullish();
const optionalText = z.string().nullish();
const tagList = z
  .array(z.unknown())
  .nullish()
  .transform((tags) => (tags ?? []).filter((tag): tag is string => typeof tag === 'string'));
// `gated` is false, "auto" or "manual".
const gatedFlag = z
  .union([z.boolean(), z.string()])
  .nullish()
  .transform((value) => value !== undefined && value !== null && value !== false);
const safetensorsInfo = z
  .object({
    total: z.number().nonnegative().nullish(),
    parameters: z.record(z.string(), z.number()).nullish(),
  })
  .nullish()
  // A surprising shape here should not hide the rest of the answer.
  .catch(undefined);

const modelSummarySchema = z.object({
  id: z.string().min(1),
  downloads: count,
  likes: count,
  pipeline_tag: optionalText,
  library_name: optionalText,
  tags: tagList,
  gated: gatedFlag,
  safetensors: safetensorsInfo,
});

// Card data is user-written YAML: each field may be any shape, so bad ones are dropped, not fatal.
const stringOrList = z
  .union([z.string(), z.array(z.string())])
  .nullish()
  .catch(undefined)
  .transform((value) =>
    value === undefined || value === null ? [] : Array.isArray(value) ? value : [value],
  );
const modelInfoSchema = modelSummarySchema.extend({
  lastModified: optionalText,
  cardData: z.object({ license: stringOrList, base_model: stringOrList }).nullish().catch(undefined),
});

const datasetSummarySchema = z.object({
  id: z.string().min(1),
  downloads: count,
  likes: count,
  tags: tagList,
  gated: gatedFlag,
  description: optionalText,
});

function toModelSummary(model: z.output<typeof modelSummarySchema>): HubModelSummary {
  return {
    id: model.id,
    downloads: model.downloads ?? undefined,
    likes: model.likes ?? undefined,
    pipelineTag: model.pipeline_tag ?? undefined,
    libraryName: model.library_name ?? undefined,
    tags: model.tags,
    parameters: model.safetensors?.total ?? undefined,
    gated: model.gated,
  };
}

function describeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.join('.') || '(body)'}: ${issue.message}`)
    .join('; ');
}

/** The Hub's error bodies look like `{"error":"Repository not found"}`; anything else is cut short. */
function errorDetail(text: string): string {
  const trimmed = text.trim();
  if (trimmed === '') return '';
  try {
    const parsed = z.object({ error: z.string() }).safeParse(JSON.parse(trimmed));
    if (parsed.success) return parsed.data.error.slice(0, 200);
  } catch {
    // Not JSON (an HTML error page from a proxy, say): fall through to the raw start.
  }
  return trimmed.replace(/\s+/g, ' ').slice(0, 120);
}

/** Create a Hub client. No request is made until a method is called. */
export function createHubClient(options: HubClientOptions): HubClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const fetchImplementation = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const headers: Record<string, string> = { accept: 'application/json' };
  if (options.token !== undefined && options.token !== '') headers.authorization = `Bearer ${options.token}`;

  async function getJson(
    path: string,
    parameters: Record<string, string>,
    signal: AbortSignal | undefined,
  ): Promise<unknown> {
    const url = new URL(`${baseUrl}${path}`);
    for (const [key, value] of Object.entries(parameters)) url.searchParams.set(key, value);
    const where = `${url.origin}${url.pathname}`;
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    const forwardAbort = () => controller.abort();
    signal?.addEventListener('abort', forwardAbort, { once: true });
    const started = Date.now();

    const failure = (error: unknown): HubError => {
      if (error instanceof HubError) return error;
      if (timedOut) return new HubError('hub_timeout', `no answer from ${where} within ${timeoutMs} ms`);
      if (signal?.aborted === true)
        return new HubError('hub_aborted', `the request to ${where} was cancelled`);
      // undici hides the useful part (ECONNREFUSED, ENOTFOUND) in `cause`.
      const cause =
        error instanceof Error && error.cause !== undefined ? ` (${errorMessage(error.cause)})` : '';
      return new HubError('hub_network', `cannot reach ${where}: ${errorMessage(error)}${cause}`, {
        cause: error,
      });
    };

    try {
      if (signal?.aborted === true)
        throw new HubError('hub_aborted', `the request to ${where} was cancelled`);
      const response = await fetchImplementation(url, { headers, signal: controller.signal });
      const text = await response.text();
      options.logger?.debug({ url: where, status: response.status, ms: Date.now() - started }, 'hub request');
      if (!response.ok) {
        const detail = errorDetail(text);
        throw new HubError(
          'hub_http',
          `${where} answered HTTP ${response.status}${detail === '' ? '' : `: ${detail}`}`,
          { status: response.status },
        );
      }
      try {
        return JSON.parse(text) as unknown;
      } catch (error) {
        throw new HubError('hub_bad_response', `${where} did not answer with JSON`, { cause: error });
      }
    } catch (error) {
      const hubError = failure(error);
      options.logger?.debug(
        { url: where, code: hubError.code, ms: Date.now() - started },
        'hub request failed',
      );
      throw hubError;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', forwardAbort);
    }
  }

  function validate<Schema extends z.ZodType>(schema: Schema, body: unknown, what: string): z.output<Schema> {
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      throw new HubError(
        'hub_bad_response',
        `unexpected ${what} from the hub: ${describeIssues(parsed.error)}`,
        {
          cause: parsed.error,
        },
      );
    }
    return parsed.data;
  }

  const listParameters = (query: string, limit: number) => ({
    search: query,
    limit: String(limit),
    sort: 'downloads',
    direction: '-1',
  });

  return {
    async searchModels({ query, limit, task, signal }) {
      const parameters: Record<string, string> = listParameters(query, limit);
      if (task !== undefined) parameters.pipeline_tag = task;
      const body = await getJson('/api/models', parameters, signal);
      return validate(z.array(modelSummarySchema), body, 'model list').map(toModelSummary);
    },

    async searchDatasets({ query, limit, signal }) {
      const body = await getJson('/api/datasets', listParameters(query, limit), signal);
      return validate(z.array(datasetSummarySchema), body, 'dataset list').map((dataset) => ({
        id: dataset.id,
        downloads: dataset.downloads ?? undefined,
        likes: dataset.likes ?? undefined,
        tags: dataset.tags,
        gated: dataset.gated,
        description: dataset.description ?? undefined,
      }));
    },

    async getModel(modelId, requestOptions = {}) {
      if (!hubRepoIdPattern.test(modelId)) {
        throw new HubError('hub_invalid_id', `"${modelId}" is not a hub model id (expected owner/name)`);
      }
      // Each segment is encoded on its own: the slash between owner and name is part of the route.
      const path = `/api/models/${modelId.split('/').map(encodeURIComponent).join('/')}`;
      const body = await getJson(path, {}, requestOptions.signal);
      const model = validate(modelInfoSchema, body, 'model info');
      return {
        ...toModelSummary(model),
        license: model.cardData?.license.join(', ') || undefined,
        baseModels: model.cardData?.base_model ?? [],
        parametersByDtype: model.safetensors?.parameters ?? {},
        lastModified: model.lastModified ?? undefined,
      };
    },
  };
}
