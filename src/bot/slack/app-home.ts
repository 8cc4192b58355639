/**
 * Slack's App Home tab: the runs with status, GPUs, step and last loss, and pause / resume / stop
 * buttons. A click acts as the same command typed in chat by the clicking user (run-access.ts decides),
 * then the tab is published again with the outcome on top.
 */

import type { App } from '@slack/bolt';
import { z } from 'zod';
import { BotError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { type ChatUser, encodeThreadId } from '../chat-adapter.js';
import type { RunControl, RunOverview, RunsDirectory } from '../runs-directory.js';
import type { SlackBlock } from './cards.js';
import { escapeMrkdwn } from './mrkdwn.js';

/** Action ids of the tab's buttons: `home:<change>:<runId>`. */
const HOME_ACTION_PREFIX = 'home:';
/** A home tab holds at most 100 blocks; two per run plus the header and notice. */
const MAX_RUNS = 45;

const CONTROLS: Record<string, RunControl[]> = {
  running: ['pause', 'stop'],
  queued: ['pause', 'stop'],
  paused: ['resume', 'stop'],
  failed: ['resume', 'stop'],
  pending_approval: ['stop'],
};

const LABELS: Record<RunControl, string> = { pause: 'Pause', resume: 'Resume', stop: 'Stop' };

/**
 * The session id a home-tab click is made from. It is no run's thread, so only a run's requester (or an
 * approver, when approvers are configured) may change it from here, as from any other thread.
 */
function homeThreadId(userId: string): string {
  return encodeThreadId({ platform: 'slack', channel: 'home', thread: userId });
}

function formatLoss(loss: number): string {
  if (!Number.isFinite(loss)) return String(loss);
  return Math.abs(loss) >= 0.001 && Math.abs(loss) < 10_000 ? loss.toPrecision(4) : loss.toExponential(3);
}

function runLine(run: RunOverview): string {
  const parts = [
    `*${escapeMrkdwn(run.name)}*`,
    run.status.replace('_', ' '),
    `${run.gpus} GPU${run.gpus === 1 ? '' : 's'}`,
    ...(run.step === undefined ? [] : [`step ${run.step}`]),
    ...(run.loss === undefined ? [] : [`loss ${formatLoss(run.loss)}`]),
  ];
  return parts.join(' · ');
}

/** The `home` view for `views.publish`. */
function homeView(runs: readonly RunOverview[], notice?: string) {
  const blocks: SlackBlock[] = [{ type: 'header', text: { type: 'plain_text', text: 'Runs' } }];
  if (notice !== undefined) {
    blocks.push({ type: 'section', text: { type: 'mrkdwn', text: escapeMrkdwn(notice).slice(0, 3000) } });
  }
  if (runs.length === 0) {
    blocks.push({ type: 'section', text: { type: 'mrkdwn', text: 'No runs yet.' } });
  }
  for (const run of runs.slice(0, MAX_RUNS)) {
    blocks.push({ type: 'section', text: { type: 'mrkdwn', text: runLine(run) } });
    const controls = CONTROLS[run.status] ?? [];
    if (controls.length > 0) {
      blocks.push({
        type: 'actions',
        block_id: `run-actions:${run.id}`,
        elements: controls.map((change) => ({
          type: 'button' as const,
          action_id: `${HOME_ACTION_PREFIX}${change}:${run.id}`,
          value: run.id,
          text: { type: 'plain_text', text: LABELS[change] },
          ...(change === 'stop' ? { style: 'danger' as const } : {}),
        })),
      });
    }
  }
  if (runs.length > MAX_RUNS) {
    blocks.push({
      type: 'context',
      elements: [{ type: 'mrkdwn', text: `${runs.length - MAX_RUNS} older runs not shown.` }],
    });
  }
  return { type: 'home' as const, blocks };
}

const homeOpenedSchema = z.object({ user: z.string().min(1), tab: z.string().optional() });
const homeActionSchema = z.object({
  user: z.object({ id: z.string().min(1) }),
  actions: z.array(z.object({ action_id: z.string() })).min(1),
});

interface AppHomeDependencies {
  logger: Logger;
  /** The runs the tab lists and changes; without it the tab says runs are not available here. */
  runs: RunsDirectory | undefined;
  chatUser(userId: string): Promise<ChatUser>;
  /** `views.publish` of `view` for `userId`. */
  publish(userId: string, view: ReturnType<typeof homeView>): Promise<void>;
}

/** Registers the `app_home_opened` event and the tab's buttons. */
export function registerAppHome(target: App, dependencies: AppHomeDependencies): void {
  const { logger, runs } = dependencies;

  async function publish(userId: string, notice?: string): Promise<void> {
    let list: RunOverview[] = [];
    let shown = notice;
    if (runs === undefined) {
      shown = 'Runs are not available in this process.';
    } else {
      try {
        list = await runs.list();
      } catch (error) {
        logger.error({ err: error }, 'could not list runs for the App Home');
        shown = 'Could not read the runs right now; open the tab again in a moment.';
      }
    }
    try {
      await dependencies.publish(userId, homeView(list, shown));
    } catch (error) {
      logger.warn({ err: error, userId }, 'could not publish the App Home');
    }
  }

  target.event('app_home_opened', async ({ event }) => {
    const parsed = homeOpenedSchema.safeParse(event);
    // The Messages tab opens this event too; only the Home tab is ours to draw.
    if (!parsed.success || (parsed.data.tab !== undefined && parsed.data.tab !== 'home')) return;
    await publish(parsed.data.user);
  });

  target.action(new RegExp(`^${HOME_ACTION_PREFIX}`), async ({ ack, body }) => {
    await ack();
    const parsed = homeActionSchema.safeParse(body);
    if (!parsed.success) return;
    const userId = parsed.data.user.id;
    const actionId = parsed.data.actions[0]?.action_id ?? '';
    const [, change, runId] = /^home:(pause|resume|stop):(.+)$/.exec(actionId) ?? [];
    if (change === undefined || runId === undefined || runs === undefined) {
      await publish(userId, 'That button is out of date; here are the runs now.');
      return;
    }
    let notice: string;
    try {
      const user = await dependencies.chatUser(userId);
      notice = await runs.change(change as RunControl, runId, user, homeThreadId(userId));
    } catch (error) {
      // Refusals and impossible changes are sentences for the person; anything else is logged.
      if (error instanceof BotError) notice = error.message;
      else {
        logger.error({ err: error, actionId, userId }, 'App Home action failed');
        notice = 'That click could not be handled right now; please try again.';
      }
    }
    await publish(userId, notice);
  });
}
