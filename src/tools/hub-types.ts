import { BotError } from '../errors.js';

/**
 * The Hub's typed errors and the shapes the Hub tools work with, independent of the HTTP client
 * (`hub-api.ts`, over `@huggingface/hub`).
 */

type HubErrorCode =
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
  /** The commit of `main` when the Hub answered (recorded on the thread's next launch). */
  sha: string | undefined;
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
  /** The commit of a dataset's `main`, or undefined when the Hub does not say. */
  getDatasetSha(datasetId: string, options?: { signal?: AbortSignal }): Promise<string | undefined>;
}

/** Hub ids are `name` or `owner/name`; one pattern keeps tool input from steering the request path. */
export const hubRepoIdPattern = /^[A-Za-z0-9][A-Za-z0-9._-]*(?:\/[A-Za-z0-9][A-Za-z0-9._-]*)?$/;
