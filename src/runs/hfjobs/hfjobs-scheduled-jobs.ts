import type { Config } from '../../config/config.js';
import { definedOnly } from '../../defined-only.js';
import { RunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { RunMeta } from '../records/run-types.js';
import { createHfJobsClient, type HfScheduledJob } from './hfjobs-client.js';
import { createHardwareCatalog, pickFlavor } from './hfjobs-hardware.js';
import { createHfJobSpecBuilder, HF_JOB_LABELS } from './hfjobs-job-spec.js';

/**
 * Recurring runs (`@shepherd schedule <run> --cron "0 3 * * *"`) as HF scheduled jobs, over the package's
 * `createScheduledJob`, `listScheduledJobs` and `deleteScheduledJob` (`POST|GET /api/scheduled-jobs/{namespace}`,
 * `DELETE /api/scheduled-jobs/{namespace}/{id}`). Each scheduled job carries the same job as the run's own
 * launch (image, flavour, script, timeout) and the run's id in its labels. The approval is the caller's.
 */

/** A scheduled job as `runs` lists it. */
export interface HfSchedule {
  id: string;
  schedule: string;
  suspended: boolean;
  flavor: string;
  image?: string;
  /** The Shepherd run it repeats (its `shepherd-run` label), when Shepherd created it. */
  runId?: string;
  nextRunAt?: string;
  lastJobId?: string;
}

export interface HfScheduledJobs {
  create(input: { meta: RunMeta; runDir: string; schedule: string }): Promise<HfSchedule>;
  list(): Promise<HfSchedule[]>;
  delete(scheduleId: string): Promise<void>;
}

/** Shortcuts the Hub accepts (huggingface_hub `ScheduledJobInfo.schedule`). */
const SHORTCUTS = new Set(['@annually', '@yearly', '@monthly', '@weekly', '@daily', '@hourly']);
const CRON_FIELD = /^[\d*/,\-A-Za-z?]+$/;

/** A five-field cron expression or a shortcut; refused before anything is sent otherwise. */
export function checkSchedule(schedule: string): string {
  const trimmed = schedule.trim();
  if (SHORTCUTS.has(trimmed)) return trimmed;
  const fields = trimmed.split(/\s+/);
  if (fields.length === 5 && fields.every((field) => CRON_FIELD.test(field))) return fields.join(' ');
  throw new RunError(
    'invalid_run',
    `"${schedule}" is not a schedule: give five cron fields ("0 3 * * *") or one of ${[...SHORTCUTS].join(', ')}`,
  );
}

function toSchedule(job: HfScheduledJob): HfSchedule {
  const runId = job.jobSpec.labels?.[HF_JOB_LABELS.run];
  return {
    id: job.id,
    schedule: job.schedule,
    suspended: job.suspend,
    flavor: job.jobSpec.flavor,
    ...definedOnly({
      image: job.jobSpec.dockerImage ?? undefined,
      runId,
      nextRunAt: job.status?.nextJobRunAt ?? undefined,
      lastJobId: job.status?.lastJob?.id,
    }),
  };
}

export function createHfScheduledJobs(options: {
  settings: Config['hfJobs'];
  hub: { url: string; token?: string | undefined };
  helperDir: string;
  logger: Logger;
  fetch?: typeof fetch;
  secrets?: Readonly<Record<string, string>>;
}): HfScheduledJobs {
  const client = createHfJobsClient({
    url: options.hub.url,
    token: options.hub.token,
    namespace: options.settings.namespace,
    ...definedOnly({ fetch: options.fetch }),
  });
  const catalog = createHardwareCatalog({ fetchHardware: () => client.hardware(), logger: options.logger });
  const specs = createHfJobSpecBuilder({
    helperDir: options.helperDir,
    ...definedOnly({ secrets: options.secrets }),
  });

  return {
    async create({ meta, runDir, schedule }) {
      const cron = checkSchedule(schedule);
      const { flavor } = pickFlavor(meta, await catalog.list(), options.settings.flavor);
      const spec = await specs.build({
        meta,
        runDir,
        image: meta.image ?? options.settings.image,
        flavor: flavor.name,
      });
      const created = await client.createScheduled(await client.namespace(), spec, cron);
      options.logger.info(
        { runId: meta.id, scheduleId: created.id, schedule: cron },
        'HF scheduled job created',
      );
      return toSchedule(created);
    },
    async list() {
      return (await client.listScheduled(await client.namespace())).map(toSchedule);
    },
    async delete(scheduleId) {
      await client.deleteScheduled(await client.namespace(), scheduleId);
      options.logger.info({ scheduleId }, 'HF scheduled job deleted');
    },
  };
}
