import type { Redis } from 'ioredis';
import type { Notifier } from '../bot/notifier.js';
import type { Logger } from '../logger.js';
import { parseTrackerLinks, type TrackerLinks, trackerLinkLines } from '../runs/tracker-links.js';
import { resolvedApprovalCard } from './approval-card.js';
import type { ApprovalStore } from './approval-store.js';

/**
 * Tracker links on a run's started card: the approval card that launched it, edited once when the monitor
 * first finds the run's links (wandb prints its URL after the start, so they are never known when the
 * card is resolved). Either side may come first: links found before the approval is settled wait in
 * Redis, and the settling looks for them (each writes its key before reading the other's, so one of them
 * sees both); a NX key makes the edit happen once.
 */

const KEEP_SECONDS = 30 * 24 * 3600;
/** Approvals that launch the run they name (a sweep's card names the sweep; a schedule launches later). */
const LAUNCHING = new Set(['start', 'resume', 'script-change']);

export function createRunCardLinks(options: {
  redis: Redis;
  prefix: string;
  store: ApprovalStore;
  notifier: Pick<Notifier, 'updateCard'>;
  logger: Logger;
}) {
  const { redis, prefix, store } = options;
  const cardKey = (runId: string) => `${prefix}:run-card:${runId}`;
  const pendingKey = (runId: string) => `${prefix}:run-card-links:${runId}`;
  const shownKey = (runId: string) => `${prefix}:run-card-links-shown:${runId}`;

  async function edit(runId: string, approvalId: string, links: TrackerLinks): Promise<void> {
    const [approval, decision] = await Promise.all([store.get(approvalId), store.getDecision(approvalId)]);
    if (approval?.cardMessageId === undefined || decision === undefined) return;
    if ((await redis.set(shownKey(runId), approvalId, 'EX', KEEP_SECONDS, 'NX')) !== 'OK') return;
    const card = resolvedApprovalCard(approval, decision);
    card.fields = [...(card.fields ?? []), ...trackerLinkLines(links)];
    await options.notifier.updateCard(approval.threadId, approval.cardMessageId, card);
  }

  return {
    /** The monitor found the run's first links: onto its started card, once. */
    async show(runId: string, links: TrackerLinks): Promise<void> {
      await redis.set(pendingKey(runId), JSON.stringify(links), 'EX', KEEP_SECONDS);
      const approvalId = await redis.get(cardKey(runId));
      if (approvalId !== null) await edit(runId, approvalId, links);
    },

    /** After an approval's control job: an approved launch's card is its run's started card. */
    async settled(approvalId: string): Promise<void> {
      const [approval, decision] = await Promise.all([store.get(approvalId), store.getDecision(approvalId)]);
      if (approval === undefined || decision?.decision !== 'approved' || !LAUNCHING.has(approval.kind))
        return;
      await redis.set(cardKey(approval.runId), approvalId, 'EX', KEEP_SECONDS);
      const pending = parseTrackerLinks((await redis.get(pendingKey(approval.runId))) ?? '');
      if (pending === undefined) return;
      try {
        await edit(approval.runId, approvalId, pending);
      } catch (error) {
        options.logger.warn({ runId: approval.runId, err: error }, 'could not add tracker links to the card');
      }
    },
  };
}
