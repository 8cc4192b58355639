import { randomBytes } from 'node:crypto';
import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Redis } from 'ioredis';
import type { ActionOutcome, Card, ChatUser, InboundAction } from '../bot/chat-adapter.js';
import type { Notifier } from '../bot/notifier.js';
import type { WatchTarget } from '../commands/parse-command.js';
import { definedOnly } from '../defined-only.js';
import { errorMessage, ToolPolicyError } from '../errors.js';
import type { Logger } from '../logger.js';
import { readProcessStat } from '../runs/process-table.js';
import { type RunAccess, RunAccessError } from '../runs/run-access.js';
import type { RunService } from '../runs/run-service.js';
import type { RunMeta } from '../runs/run-types.js';
import type { RunCommand } from '../runs/slurm/slurm-command.js';
import { readSlurmJobInfo } from '../runs/slurm/slurm-job-info.js';

/**
 * `watch slurm:<jobid>` and `watch <log> [--pid N]`: runs Shepherd did not launch get the same parsing,
 * detectors, alerts, status and charts. Stopping one (scancel, or SIGTERM to the pid) is not Shepherd's
 * to decide alone: `stop` posts a confirmation card first.
 */

/** Watched runs are never stopped for their time limit by Shepherd: they keep the scheduler's own. */
const WATCH_MAX_HOURS = 720;
const CONFIRM_TTL_S = 24 * 3600;

interface WatchOperationsOptions {
  runs: RunService;
  workspace: string;
  redis: Redis;
  prefix: string;
  notifier: Notifier;
  /** The Slurm CLI (`scontrol`, `sacct`). */
  slurmCommand: RunCommand;
  /** Who may decide a stop card (the requester or an approver); absent: anyone. */
  access?: RunAccess;
  logger: Logger;
}

interface StopConfirmation {
  runId: string;
  runName: string;
  threadId: string;
  what: string;
  cardMessageId?: string;
}

function stopWhat(meta: RunMeta): string {
  if (meta.watch?.source === 'slurm') return `scancel of Slurm job ${meta.jobId ?? '?'}`;
  if (meta.watch?.source === 'log' && meta.watch.pid !== undefined) return `SIGTERM to pid ${meta.watch.pid}`;
  return 'nothing to signal (no pid was given): Shepherd just stops watching';
}

export function createWatchOperations(options: WatchOperationsOptions) {
  const { runs, redis, prefix, notifier, logger } = options;
  const confirmKey = (token: string) => `${prefix}:stop-confirm:${token}`;
  const decidedKey = (token: string) => `${prefix}:stop-confirm-decided:${token}`;

  async function watchSlurm(jobId: string, runName: string | undefined, threadId: string, actor: ChatUser) {
    const info = await readSlurmJobInfo(options.slurmCommand, jobId);
    const meta = await runs.adopt({
      name: runName ?? info.name,
      threadId,
      requester: actor,
      watch: { source: 'slurm', logPath: info.outputPath },
      jobId,
      maxHours: WATCH_MAX_HOURS,
      description: `Slurm job ${jobId} (${info.state.toLowerCase()}), output ${info.outputPath}`,
    });
    return `Watching Slurm job ${jobId} as ${meta.name} (${meta.id}): its output is ${info.outputPath}. Alerts, \`status ${meta.name}\` and \`chart ${meta.name}\` work as for any run; Shepherd did not launch it, so it offers no fix or relaunch.`;
  }

  async function watchLog(
    file: string,
    pid: number | undefined,
    runName: string | undefined,
    threadId: string,
    actor: ChatUser,
  ) {
    const root = await realpath(options.workspace);
    const candidate = path.resolve(root, file);
    let real: string;
    try {
      real = await realpath(candidate);
    } catch {
      throw new ToolPolicyError('log_not_found', `no file ${file} in the workspace`);
    }
    if (real !== root && !real.startsWith(root + path.sep)) {
      throw new ToolPolicyError(
        'path_outside_workspace',
        `${file} is outside the workspace (${root}); refused`,
      );
    }
    if (!(await stat(real)).isFile()) throw new ToolPolicyError('log_not_found', `${file} is not a file`);
    let pidStartTime: string | undefined;
    if (pid !== undefined) {
      const process = readProcessStat(pid);
      if (process === undefined || process.state === 'Z') {
        throw new ToolPolicyError(
          'pid_not_found',
          `no running process ${pid}; start the watch while it runs`,
        );
      }
      pidStartTime = process.startTime;
    }
    const meta = await runs.adopt({
      name:
        runName ??
        path
          .basename(real)
          .replace(/\.[^.]*$/, '')
          .replace(/_/g, '-'),
      threadId,
      requester: actor,
      watch: {
        source: 'log',
        logPath: real,
        ...definedOnly({ pid, pidStartTime }),
      },
      maxHours: WATCH_MAX_HOURS,
      description: `${path.relative(root, real)}${pid === undefined ? '' : ` while pid ${pid} lives`}`,
    });
    return `Watching ${path.relative(root, real)} as ${meta.name} (${meta.id})${pid === undefined ? ' (no pid: it counts as running until you stop watching it)' : `, alive while pid ${pid} lives`}. Shepherd did not launch it, so it offers no fix or relaunch.`;
  }

  async function watch(target: WatchTarget, runName: string | undefined, threadId: string, actor: ChatUser) {
    return target.kind === 'slurm'
      ? watchSlurm(target.jobId, runName, threadId, actor)
      : watchLog(target.path, target.pid, runName, threadId, actor);
  }

  function confirmCard(confirmation: StopConfirmation, token: string): Card {
    return {
      title: `Stop watched run ${confirmation.runName}?`,
      text: `Shepherd did not launch ${confirmation.runName}. Stopping it means ${confirmation.what}.`,
      fields: [{ label: 'Run', value: confirmation.runName }],
      actions: [
        { actionId: `confirm-stop:${token}`, label: 'Stop it', style: 'danger' },
        { actionId: `keep-running:${token}`, label: 'Keep it running' },
      ],
    };
  }

  /** `stop <watched run>`: posts the confirmation card; the button does the stop. */
  async function confirmStop(meta: RunMeta, actor: ChatUser): Promise<string> {
    const token = randomBytes(6).toString('hex');
    const confirmation: StopConfirmation = {
      runId: meta.id,
      runName: meta.name,
      threadId: meta.threadId,
      what: stopWhat(meta),
    };
    const posted = await notifier.postCard(meta.threadId, confirmCard(confirmation, token));
    await redis.set(
      confirmKey(token),
      JSON.stringify({ ...confirmation, cardMessageId: posted.messageId }),
      'EX',
      CONFIRM_TTL_S,
    );
    logger.info({ runId: meta.id, by: actor.id }, 'stop of a watched run asked; waiting for confirmation');
    return `${meta.name} is a watched run: confirm on the card to stop it (${confirmation.what}).`;
  }

  async function resolve(confirmation: StopConfirmation, outcome: string): Promise<void> {
    if (confirmation.cardMessageId === undefined) return;
    const { actions: _actions, ...card } = confirmCard(confirmation, '');
    await notifier.updateCard(confirmation.threadId, confirmation.cardMessageId, {
      ...card,
      resolved: outcome,
    });
  }

  /** Buttons `confirm-stop:<token>` and `keep-running:<token>`; the first click decides. */
  async function onAction(
    action: InboundAction,
    verb: 'confirm-stop' | 'keep-running',
    token: string,
  ): Promise<ActionOutcome> {
    const raw = await redis.get(confirmKey(token));
    if (raw === null) return { status: 'unknown', message: 'this confirmation has expired; send stop again' };
    const confirmation = JSON.parse(raw) as StopConfirmation;
    if (options.access !== undefined) {
      // Deciding a stop card is stopping the run (or refusing to): checked and audited before it counts.
      try {
        const meta = await runs.findRun(confirmation.runId);
        await options.access.authorize(meta, action.user, action.threadId, 'stop', 'button');
      } catch (error) {
        if (error instanceof RunAccessError) return { status: 'forbidden', message: error.message };
        throw error;
      }
    }
    const won = await redis.set(decidedKey(token), action.user.name, 'EX', CONFIRM_TTL_S, 'NX');
    if (won !== 'OK') return { status: 'resolved', message: 'this was already decided' };
    const clock = `${new Date().toISOString().slice(11, 16)} UTC`;
    if (verb === 'keep-running') {
      await resolve(confirmation, `Kept running by ${action.user.name} at ${clock}`);
      return { status: 'accepted', message: 'kept running' };
    }
    // The stop may wait out the grace period: answer the click now, report on the card.
    void runs
      .stop(confirmation.runId, action.user, `stopped from the thread (${confirmation.what})`)
      .then(() => resolve(confirmation, `Stopped by ${action.user.name} at ${clock} (${confirmation.what})`))
      .catch(async (error: unknown) => {
        logger.warn({ runId: confirmation.runId, err: errorMessage(error) }, 'stop of a watched run failed');
        await resolve(confirmation, `Stop by ${action.user.name} failed: ${errorMessage(error)}`).catch(
          () => undefined,
        );
      });
    return { status: 'accepted', message: 'stopping' };
  }

  return { watch, confirmStop, onAction };
}
