import type { ChatUser } from '../../bot/chat-adapter.js';
import { RunError } from '../../errors.js';
import { readReproducibility, reproducibilityLines } from '../launch/launch-record.js';
import { createChangeRequests } from './change-requests.js';
import { createForkRequests } from './fork-requests.js';
import { createLaunchChecks } from './launch-checks.js';
import { createLaunchRequests } from './launch-requests.js';
import type { RunOperations, RunOperationsOptions } from './operation-types.js';
import { clusterText, describeRun, lineageLines, statusText } from './run-texts.js';

/**
 * The run actions shared by agent tools and plain commands, so both follow exactly the same approval
 * rules. Each returns a sentence for the thread; expected failures (unknown run, too many GPUs) come
 * back as `RunError`/`ToolPolicyError` with a message written for people.
 */
export function createRunOperations(options: RunOperationsOptions): RunOperations {
  const checks = createLaunchChecks(options);

  async function list(): Promise<string> {
    const all = await options.queries.list();
    const scheduled = (await options.schedules?.listLines()) ?? [];
    if (all.length === 0 && scheduled.length === 0) return 'No training runs yet.';
    return [...all.slice(0, 30).map((meta) => `• ${describeRun(meta)}`), ...scheduled].join('\n');
  }

  async function schedule(
    reference: string,
    cron: string,
    actor: ChatUser,
    threadId: string,
  ): Promise<string> {
    if (options.schedules === undefined) {
      throw new RunError('unknown_backend', 'recurring jobs run on HF Jobs, which is not configured here');
    }
    const prepared = await options.schedules.prepare(reference, cron);
    await options.access?.authorize(prepared.meta, actor, threadId, 'resume', 'command');
    const { approval } = await options.approvals.request({
      kind: 'schedule',
      meta: prepared.meta,
      requester: actor,
      scriptExcerpt: prepared.script,
      origin: 'command',
      schedule: prepared.cron,
      reason: `repeat ${prepared.meta.name} on HF Jobs at "${prepared.cron}" (UTC) until the schedule is deleted`,
    });
    return `Approval requested for a recurring job of ${prepared.meta.name} at "${prepared.cron}" (approval ${approval.id}).`;
  }

  return {
    ...createLaunchRequests(options, checks),
    ...createChangeRequests(options, checks),
    list,
    schedule,
    fork: createForkRequests(options, checks),
    status: async (reference, view) => {
      const report = await options.queries.status(reference);
      const forks = (await options.queries.list()).filter((meta) => meta.forkOf?.runId === report.meta.id);
      const text = [statusText(report), ...lineageLines(report.meta, forks)].join('\n');
      if (view?.full !== true) return text;
      const reproducibility = await readReproducibility(options.queries.runDirectory(report.meta.id));
      return [text, '', ...reproducibilityLines(reproducibility)].join('\n');
    },
    cluster: async () => clusterText(await options.queries.clusterInfo()),
  };
}
