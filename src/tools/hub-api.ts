import {
  datasetInfo,
  HubApiError,
  listDatasets,
  listModels,
  modelInfo,
  type PipelineType,
} from '@huggingface/hub';
import { z } from 'zod';
import { errorMessage } from '../errors.js';
import type { Logger } from '../logger.js';
import { type HubClient, HubError, type HubModelSummary, hubRepoIdPattern } from './hub-types.js';

/**
 * The Hub client behind the search tools, over `@huggingface/hub` (`listModels`, `listDatasets`,
 * `modelInfo`). The package does the routes and paging; the `fetch` we inject adds the token, the
 * timeout (headers and body), cancellation and logging. Every failure becomes a `HubError`.
 */

interface HubClientOptions {
  /** e.g. `https://huggingface.co` or a mirror. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer …` (private and gated repos); never logged. */
  token?: string | undefined;
  fetch?: typeof fetch;
  /** Covers the whole call, headers and body. Default 10 s. */
  timeoutMs?: number;
  logger?: Logger;
}

// Lenient schemas: the Hub adds fields freely and omits many on older repos, so only the id is required.
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
// Card data is user-written YAML: each field may be any shape, so bad ones are dropped, not fatal.
const stringOrList = z
  .union([z.string(), z.array(z.string())])
  .nullish()
  .catch(undefined)
  .transform((value) =>
    value === undefined || value === null ? [] : Array.isArray(value) ? value : [value],
  );

/** What the package yields for a model: `name` is the repo id (`id` is the Hub's internal one). */
const modelEntrySchema = z.object({
  name: z.string().min(1),
  downloads: count,
  likes: count,
  task: optionalText,
  library_name: optionalText,
  tags: tagList,
  gated: gatedFlag,
  safetensors: safetensorsInfo,
  sha: optionalText,
});
const modelInfoSchema = modelEntrySchema.extend({
  updatedAt: z.date().optional().catch(undefined),
  cardData: z.object({ license: stringOrList, base_model: stringOrList }).nullish().catch(undefined),
});
const datasetEntrySchema = z.object({
  name: z.string().min(1),
  downloads: count,
  likes: count,
  tags: tagList,
  gated: gatedFlag,
  description: optionalText,
});

function toModelSummary(model: z.output<typeof modelEntrySchema>): HubModelSummary {
  return {
    id: model.name,
    downloads: model.downloads ?? undefined,
    likes: model.likes ?? undefined,
    pipelineTag: model.task ?? undefined,
    libraryName: model.library_name ?? undefined,
    tags: model.tags,
    parameters: model.safetensors?.total ?? undefined,
    gated: model.gated,
    sha: model.sha ?? undefined,
  };
}

function describeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.join('.') || '(body)'}: ${issue.message}`)
    .join('; ');
}

/** The Hub's error bodies look like `{"error":"Repository not found"}`; anything else is cut short. */
function errorDetail(error: HubApiError): string {
  const data = error.data as { error?: unknown; message?: unknown } | undefined;
  const text =
    typeof data?.error === 'string' ? data.error : typeof data?.message === 'string' ? data.message : '';
  const trimmed = text.trim().replace(/\s+/g, ' ');
  return trimmed.length > 200 ? `${trimmed.slice(0, 120)}…` : trimmed;
}

/** Create a Hub client. No request is made until a method is called. */
export function createHubClient(options: HubClientOptions): HubClient {
  const hubUrl = options.baseUrl.replace(/\/+$/, '');
  const fetchImplementation = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 10_000;

  /**
   * One call to the package with a fetch that enforces our rules. The body is read inside the timeout
   * and handed back whole, so a body that stalls half way times out too.
   */
  async function call<T>(
    signal: AbortSignal | undefined,
    run: (hubFetch: typeof fetch) => Promise<T>,
  ): Promise<T> {
    let where = hubUrl;
    // A function, not a narrowed property: the signal may abort while a request is in flight.
    const aborted = () => signal?.aborted === true;
    const hubFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      where = `${url.origin}${url.pathname}`;
      if (aborted()) throw new HubError('hub_aborted', `the request to ${where} was cancelled`);
      const headers = new Headers(init?.headers);
      headers.delete('authorization');
      if (options.token !== undefined && options.token !== '')
        headers.set('authorization', `Bearer ${options.token}`);
      const controller = new AbortController();
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        controller.abort();
      }, timeoutMs);
      const forwardAbort = () => controller.abort();
      signal?.addEventListener('abort', forwardAbort, { once: true });
      const started = Date.now();
      try {
        const response = await fetchImplementation(url, { headers, signal: controller.signal });
        const text = await response.text();
        options.logger?.debug(
          { url: where, status: response.status, ms: Date.now() - started },
          'hub request',
        );
        // Statuses that may not carry a body (204, 304…) get none.
        const empty = [101, 204, 205, 304].includes(response.status);
        return new Response(empty ? null : text, { status: response.status, headers: response.headers });
      } catch (error) {
        const failure = timedOut
          ? new HubError('hub_timeout', `no answer from ${where} within ${timeoutMs} ms`)
          : aborted()
            ? new HubError('hub_aborted', `the request to ${where} was cancelled`)
            : new HubError(
                'hub_network',
                // undici hides the useful part (ECONNREFUSED, ENOTFOUND) in `cause`.
                `cannot reach ${where}: ${errorMessage(error)}${
                  error instanceof Error && error.cause !== undefined ? ` (${errorMessage(error.cause)})` : ''
                }`,
                { cause: error },
              );
        options.logger?.debug(
          { url: where, code: failure.code, ms: Date.now() - started },
          'hub request failed',
        );
        throw failure;
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener('abort', forwardAbort);
      }
    };
    try {
      return await run(hubFetch);
    } catch (error) {
      if (error instanceof HubError) throw error;
      if (error instanceof HubApiError) {
        const detail = errorDetail(error);
        throw new HubError(
          'hub_http',
          `${where} answered HTTP ${error.statusCode}${detail === '' ? '' : `: ${detail}`}`,
          { status: error.statusCode, cause: error },
        );
      }
      // The package parsed what we fetched: anything else it throws is an answer it could not read.
      throw new HubError(
        'hub_bad_response',
        `${where} sent an answer I cannot read (${errorMessage(error)})`,
        {
          cause: error,
        },
      );
    }
  }

  function validate<Schema extends z.ZodType>(
    schema: Schema,
    value: unknown,
    what: string,
  ): z.output<Schema> {
    const parsed = schema.safeParse(value);
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

  async function collect<T>(generator: AsyncGenerator<T>): Promise<T[]> {
    const items: T[] = [];
    for await (const item of generator) items.push(item);
    return items;
  }

  return {
    async searchModels({ query, limit, task, signal }) {
      const items = await call(signal, (hubFetch) =>
        collect(
          listModels({
            hubUrl,
            fetch: hubFetch,
            limit,
            sort: 'downloads',
            search: { query, ...(task === undefined ? {} : { task: task as PipelineType }) },
            additionalFields: ['library_name', 'tags', 'safetensors', 'sha'],
          }),
        ),
      );
      return validate(z.array(modelEntrySchema), items, 'model list').map(toModelSummary);
    },

    async searchDatasets({ query, limit, signal }) {
      const items = await call(signal, (hubFetch) =>
        collect(
          listDatasets({
            hubUrl,
            fetch: hubFetch,
            limit,
            sort: 'downloads',
            search: { query },
            additionalFields: ['tags', 'description'],
          }),
        ),
      );
      return validate(z.array(datasetEntrySchema), items, 'dataset list').map((dataset) => ({
        id: dataset.name,
        downloads: dataset.downloads ?? undefined,
        likes: dataset.likes ?? undefined,
        tags: dataset.tags,
        gated: dataset.gated,
        description: dataset.description ?? undefined,
      }));
    },

    async getModel(modelId, requestOptions = {}) {
      // The package puts the name into the path as is: only plain `owner/name` ids may reach it.
      if (!hubRepoIdPattern.test(modelId)) {
        throw new HubError('hub_invalid_id', `"${modelId}" is not a hub model id (expected owner/name)`);
      }
      const info = await call(requestOptions.signal, (hubFetch) =>
        modelInfo({
          name: modelId,
          hubUrl,
          fetch: hubFetch,
          additionalFields: ['library_name', 'tags', 'safetensors', 'cardData', 'sha'],
        }),
      );
      const model = validate(modelInfoSchema, info, 'model info');
      const updated = model.updatedAt;
      return {
        ...toModelSummary(model),
        license: model.cardData?.license.join(', ') || undefined,
        baseModels: model.cardData?.base_model ?? [],
        parametersByDtype: model.safetensors?.parameters ?? {},
        lastModified:
          updated !== undefined && !Number.isNaN(updated.getTime()) ? updated.toISOString() : undefined,
      };
    },

    async getDatasetSha(datasetId, requestOptions = {}) {
      if (!hubRepoIdPattern.test(datasetId)) {
        throw new HubError('hub_invalid_id', `"${datasetId}" is not a hub dataset id (expected owner/name)`);
      }
      const info = await call(requestOptions.signal, (hubFetch) =>
        datasetInfo({ name: datasetId, hubUrl, fetch: hubFetch, additionalFields: ['sha'] }),
      );
      return validate(z.object({ sha: optionalText }), info, 'dataset info').sha ?? undefined;
    },
  };
}
