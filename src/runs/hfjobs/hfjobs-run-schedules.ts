import { BACKEND_LABELS } from '../../config/backend-kinds.js';
import { RunError } from '../../errors.js';
import { backendOf } from '../backend-router.js';
import type { RunSchedules } from '../operations/operation-types.js';
import type { RunStore } from '../records/run-store.js';
import { checkSchedule, type HfScheduledJobs } from './hfjobs-scheduled-jobs.js';

/**
 * Recurring jobs: `schedule <run> --cron "0 3 * * *"` repeats an HF Jobs run on the Hub's scheduler. It always
 * goes through an approval card that names the schedule, and is created only when the card is approved.
 */
export function createRunSchedules(options: {
  store: RunStore;
  /** The HF scheduled-jobs client, when HF Jobs is a configured backend. */
  scheduled: HfScheduledJobs | undefined;
}): RunSchedules {
  const { store, scheduled } = options;

  function client(): HfScheduledJobs {
    if (scheduled === undefined) {
      throw new RunError('unknown_backend', 'recurring jobs run on HF Jobs, which is not configured here');
    }
    return scheduled;
  }

  async function prepare(reference: string, cron: string) {
    client();
    const meta = await store.findRun(reference);
    const backend = backendOf(meta);
    if (backend !== 'hfjobs' || meta.watch !== undefined) {
      throw new RunError(
        'invalid_run',
        `${meta.name} runs on ${BACKEND_LABELS[backend].flag}${meta.watch === undefined ? '' : ' (watched)'}; recurring jobs repeat a run Shepherd launched on HF Jobs (--on hf)`,
      );
    }
    let checked: string;
    try {
      checked = checkSchedule(cron);
    } catch (error) {
      throw new RunError('invalid_run', error instanceof Error ? error.message : String(error));
    }
    return { meta, cron: checked, script: await store.readScript(meta.id).catch(() => '') };
  }

  async function create(runId: string, cron: string): Promise<string> {
    const meta = await store.readMeta(runId);
    const created = await client().create({ meta, runDir: store.runDir(runId), schedule: cron });
    return `recurring job ${created.id} created on HF Jobs ("${created.schedule}"${created.nextRunAt === undefined ? '' : `, next at ${created.nextRunAt}`})`;
  }

  async function listLines(): Promise<string[]> {
    if (scheduled === undefined) return [];
    let all: Awaited<ReturnType<HfScheduledJobs['list']>>;
    try {
      all = await scheduled.list();
    } catch (error) {
      return [
        `(could not list HF scheduled jobs: ${error instanceof Error ? error.message : String(error)})`,
      ];
    }
    if (all.length === 0) return [];
    const names = new Map((await store.listRuns()).map((meta) => [meta.id, meta.name]));
    return [
      'Scheduled on HF Jobs:',
      ...all.map(
        (item) =>
          `• ${item.runId === undefined ? '(not from Shepherd)' : (names.get(item.runId) ?? item.runId)}: "${item.schedule}" on ${item.flavor} (${item.id}${item.suspended ? ', suspended' : ''}${item.nextRunAt === undefined ? '' : `, next ${item.nextRunAt}`})`,
      ),
    ];
  }

  return { prepare, create, listLines };
}
