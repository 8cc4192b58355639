import type { Queue } from 'bullmq';
import type { Notifier } from '../bot/notifier.js';
import { JOBS, schedule } from '../queue/jobs.js';
import type { SpendReports } from './spend-report.js';

/** `SHEPHERD_DIGEST_AT` (`HH:MM` UTC) as a cron pattern for a BullMQ job scheduler. */
function digestPattern(at: string): string {
  const [hours, minutes] = at.split(':').map(Number);
  return `${minutes ?? 0} ${hours ?? 0} * * *`;
}

/** `SHEPHERD_DIGEST_CHANNEL` as a thread id for a new top-level message: `web:digest` → `web:digest:`. */
function digestThread(channel: string): string {
  return channel.split(':').length >= 3 ? channel : `${channel}:`;
}

const DIGEST_SCHEDULER_ID = 'daily-digest';

export async function scheduleDigest(queue: Queue, at: string | undefined): Promise<void> {
  if (at === undefined) {
    await queue.removeJobScheduler(DIGEST_SCHEDULER_ID);
    return;
  }
  await schedule(queue, DIGEST_SCHEDULER_ID, { pattern: digestPattern(at), tz: 'UTC' }, JOBS.digest, {
    v: 1,
    kind: 'digest',
  });
}

export async function postDigest(options: {
  notifier: Notifier;
  spend: SpendReports;
  channel: string;
  at: Date;
  openApprovals: () => Promise<string[]>;
}): Promise<void> {
  const text = await options.spend.digest(options.at, await options.openApprovals());
  await options.notifier.post(digestThread(options.channel), text);
}
