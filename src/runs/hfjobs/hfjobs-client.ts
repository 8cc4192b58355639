import {
  cancelJob,
  createScheduledJob,
  deleteScheduledJob,
  getJob,
  HubApiError,
  listJobHardware,
  listScheduledJobs,
  runJob,
  type SpaceHardwareFlavor,
  streamJobLogs,
  whoAmI,
} from '@huggingface/hub';
import { z } from 'zod';
import { errorMessage, RunError } from '../../errors.js';
import type { ApiHardware } from './hfjobs-hardware.js';

/**
 * The HF Jobs calls Shepherd makes, over @huggingface/hub (`runJob`, `getJob`, `cancelJob`, `streamJobLogs`,
 * `listJobHardware`, the scheduled-jobs functions, `whoAmI`). Every answer is checked with zod (the package
 * returns `response.json()` unchecked) and every failure becomes a `RunError` with a sentence for people.
 */

/** `ApiJob` (@huggingface/hub `types/api/api-jobs.ts`), the fields Shepherd reads; stage kept a string. */
const jobSchema = z.looseObject({
  id: z.string(),
  status: z.looseObject({ stage: z.string(), message: z.string().nullish() }),
  flavor: z.string().nullish(),
  timeoutSeconds: z.number().nullish(),
  labels: z.record(z.string(), z.string()).nullish(),
});
export type HfJob = z.infer<typeof jobSchema>;

/** `ApiJobHardware` (same file). */
const hardwareSchema = z.array(
  z.looseObject({
    name: z.string(),
    prettyName: z.string(),
    cpu: z.string(),
    ram: z.string(),
    accelerator: z
      .looseObject({ type: z.string(), model: z.string(), quantity: z.string(), vram: z.string() })
      .nullable(),
    unitCostUSD: z.number(),
    unitLabel: z.string(),
  }),
);

/** `ApiScheduledJob` (same file) plus `status`, which the Python client reads (`ScheduledJobInfo`). */
const scheduledJobSchema = z.looseObject({
  id: z.string(),
  schedule: z.string(),
  suspend: z.boolean(),
  concurrency: z.boolean().optional(),
  createdAt: z.string().optional(),
  jobSpec: z.looseObject({
    dockerImage: z.string().nullish(),
    flavor: z.string(),
    labels: z.record(z.string(), z.string()).nullish(),
    timeoutSeconds: z.number().nullish(),
  }),
  status: z
    .looseObject({
      lastJob: z.looseObject({ id: z.string(), at: z.string() }).nullish(),
      nextJobRunAt: z.string().nullish(),
    })
    .nullish(),
});
export type HfScheduledJob = z.infer<typeof scheduledJobSchema>;

/** What a job is made of (`CreateJobOptions` minus what Shepherd never sends). */
export interface HfJobSpec {
  dockerImage: string;
  flavor: string;
  command: string[];
  environment: Record<string, string>;
  secrets?: Record<string, string>;
  timeoutSeconds: number;
  labels: Record<string, string>;
}

export interface HfJobsClient {
  readonly hubUrl: string;
  namespace(): Promise<string>;
  runJob(namespace: string, spec: HfJobSpec): Promise<HfJob>;
  getJob(namespace: string, jobId: string): Promise<HfJob>;
  cancelJob(namespace: string, jobId: string): Promise<void>;
  /** The log as SSE events; `onBytes` is called for every chunk (keep-alives too), for idle detection. */
  streamLogs(
    namespace: string,
    jobId: string,
    options: { signal: AbortSignal; onBytes: () => void },
  ): AsyncGenerator<{ message: string; timestamp: Date }>;
  hardware(): Promise<ApiHardware[]>;
  createScheduled(namespace: string, spec: HfJobSpec, schedule: string): Promise<HfScheduledJob>;
  listScheduled(namespace: string): Promise<HfScheduledJob[]>;
  deleteScheduled(namespace: string, scheduledJobId: string): Promise<void>;
}

interface HfJobsClientOptions {
  /** `config.hub.url` (`SHEPHERD_HUB_URL`). */
  url: string;
  /** `config.hub.token` (`SHEPHERD_HUB_TOKEN`, with the job scope). */
  token?: string | undefined;
  /** `config.hfJobs.namespace`; unset: the token's user, asked once with `whoAmI`. */
  namespace?: string | undefined;
  fetch?: typeof fetch;
  /** Per request (not the log stream, which lives as long as the job). */
  timeoutMs?: number;
}

/** A Hub error as a run error: 404 is a missing job, 400/422 a job the Hub refuses, the rest transient. */
function hubFailure(what: string, error: unknown): RunError {
  if (error instanceof RunError) return error;
  if (error instanceof HubApiError) {
    const data = error.data as { error?: unknown; message?: unknown } | undefined;
    const detail =
      typeof data?.error === 'string' ? data.error : typeof data?.message === 'string' ? data.message : '';
    const text = `HF Jobs ${what}: HTTP ${error.statusCode}${detail === '' ? '' : ` (${detail.slice(0, 200)})`}`;
    if (error.statusCode === 404) return new RunError('backend_job_not_found', text, { cause: error });
    if (error.statusCode === 400 || error.statusCode === 422)
      return new RunError('invalid_run', text, { cause: error });
    if (error.statusCode === 401 || error.statusCode === 403) {
      return new RunError(
        'backend_api_failed',
        `${text}; SHEPHERD_HUB_TOKEN needs the job scope for this namespace`,
        { cause: error },
      );
    }
    return new RunError('backend_api_failed', text, { cause: error });
  }
  if (error instanceof TypeError && /access token/i.test(error.message)) {
    return new RunError(
      'backend_unavailable',
      `SHEPHERD_HUB_TOKEN is not a Hugging Face token: ${error.message}`,
    );
  }
  return new RunError('backend_unavailable', `HF Jobs ${what}: ${errorMessage(error)}`, { cause: error });
}

function parsed<Schema extends z.ZodType>(schema: Schema, value: unknown, what: string): z.output<Schema> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw new RunError(
    'backend_api_failed',
    `HF Jobs sent an unexpected ${what}: ${z.prettifyError(result.error)}`,
  );
}

/** The package's `SpaceHardwareFlavor` union lags the Hub (no h200); the Hub checks the name itself. */
const asFlavor = (name: string) => name as SpaceHardwareFlavor;

export function createHfJobsClient(options: HfJobsClientOptions): HfJobsClient {
  const hubUrl = options.url.replace(/\/+$/, '');
  const baseFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const credentials = { accessToken: options.token ?? '' };
  let namespace: Promise<string> | undefined;

  /** A fetch bounded by `timeoutMs` (the whole answer is read inside it). */
  const timedFetch: typeof fetch = async (input, init) => {
    const response = await baseFetch(input, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    const body = [101, 204, 205, 304].includes(response.status) ? null : await response.arrayBuffer();
    return new Response(body, { status: response.status, headers: response.headers });
  };
  const common = { hubUrl, fetch: timedFetch, ...credentials };

  async function call<T>(what: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw hubFailure(what, error);
    }
  }

  function streamingFetch(signal: AbortSignal, onBytes: () => void): typeof fetch {
    return async (input, init) => {
      const response = await baseFetch(input, { ...init, signal });
      if (!response.ok || response.body === null) return response;
      const counted = response.body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            onBytes();
            controller.enqueue(chunk);
          },
        }),
      );
      return new Response(counted, { status: response.status, headers: response.headers });
    };
  }

  return {
    hubUrl,
    namespace() {
      if (options.namespace !== undefined && options.namespace !== '')
        return Promise.resolve(options.namespace);
      namespace ??= call('whoami', () => whoAmI(common)).then((who) => who.name);
      namespace.catch(() => {
        namespace = undefined;
      });
      return namespace;
    },
    async runJob(target, spec) {
      const job = await call('run', () =>
        runJob({ ...common, namespace: target, ...spec, flavor: asFlavor(spec.flavor) }),
      );
      return parsed(jobSchema, job, 'job');
    },
    async getJob(target, jobId) {
      return parsed(
        jobSchema,
        await call(`job ${jobId}`, () => getJob({ ...common, namespace: target, jobId })),
        'job',
      );
    },
    async cancelJob(target, jobId) {
      await call(`cancel ${jobId}`, () => cancelJob({ ...common, namespace: target, jobId }));
    },
    async *streamLogs(target, jobId, { signal, onBytes }) {
      try {
        yield* streamJobLogs({
          ...credentials,
          hubUrl,
          namespace: target,
          jobId,
          fetch: streamingFetch(signal, onBytes),
        });
      } catch (error) {
        throw hubFailure(`logs of ${jobId}`, error);
      }
    },
    async hardware() {
      return parsed(
        hardwareSchema,
        await call('hardware list', () => listJobHardware(common)),
        'hardware list',
      );
    },
    async createScheduled(target, spec, schedule) {
      const created = await call('schedule', () =>
        createScheduledJob({
          ...common,
          namespace: target,
          schedule,
          jobSpec: { ...spec, flavor: asFlavor(spec.flavor) },
        }),
      );
      return parsed(scheduledJobSchema, created, 'scheduled job');
    },
    async listScheduled(target) {
      const list = await call('scheduled jobs', () => listScheduledJobs({ ...common, namespace: target }));
      return parsed(z.array(scheduledJobSchema), list, 'scheduled job list');
    },
    async deleteScheduled(target, scheduledJobId) {
      await call(`delete scheduled job ${scheduledJobId}`, () =>
        deleteScheduledJob({ ...common, namespace: target, jobId: scheduledJobId }),
      );
    },
  };
}
