import { randomBytes } from 'node:crypto';
import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { ActionOutcome, Card, ChatUser, InboundAction } from '../bot/chat-adapter.js';
import type { Notifier } from '../bot/notifier.js';
import type { WatchTarget } from '../commands/parse-command.js';
import { createDecisionStore } from '../decisions/decision-store.js';
import { definedOnly } from '../defined-only.js';
import { errorMessage, ToolPolicyError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { RunService } from '../runs/lifecycle/run-service.js';
import type { RunAccess } from '../runs/operations/run-access.js';
import { readProcessStat } from '../runs/process-table.js';
import type { RunMeta } from '../runs/records/run-types.js';
import type { RunQueries } from '../runs/run-queries.js';
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

/** The stop card's buttons (`confirm-stop:<token>`, `keep-running:<token>`); the action router keys on these. */
export const WATCH_ACTIONS = { confirmStop: 'confirm-stop', keepRunning: 'keep-running' } as const;
type WatchVerb = (typeof WATCH_ACTIONS)[keyof typeof WATCH_ACTIONS];

interface WatchOperationsOptions {
  /** Adopts watched runs and stops them. */
  runs: RunService;
  queries: RunQueries;
  workspace: string;
  redis: Redis;
  prefix: string;
  notifier: Notifier;
  /** The Slurm CLI (`scontrol`, `sacct`). */
  slurmCommand: RunCommand;
  /** Who may decide a stop card (the requester or an approver); absent: anyone. */
  access?: RunAccess;
  /** `SHEPHERD_K8S_NAMESPACE`: where `watch k8s:<job>` looks when no namespace is given. */
  kubernetesNamespace: string;
  logger: Logger;
}

const stopConfirmationSchema = z.object({
  runId: z.string(),
  runName: z.string(),
  threadId: z.string(),
  what: z.string(),
  cardMessageId: z.string().optional(),
});
type StopConfirmation = z.infer<typeof stopConfirmationSchema>;

const stopDecisionSchema = z.object({
  verb: z.enum([WATCH_ACTIONS.confirmStop, WATCH_ACTIONS.keepRunning]),
  user: z.object({ id: z.string(), name: z.string() }),
  at: z.string(),
});
type StopDecision = z.infer<typeof stopDecisionSchema>;

function stopWhat(meta: RunMeta): string {
  if (meta.watch?.source === 'slurm') return `scancel of Slurm job ${meta.jobId ?? '?'}`;
  if (meta.watch?.source === 'kubernetes')
    return `deleting Kubernetes Job ${meta.watch.namespace}/${meta.watch.job} and its pods`;
  if (meta.watch?.source === 'hfjobs') return `cancelling HF job ${meta.watch.jobId}`;
  if (meta.watch?.source === 'log' && meta.watch.pid !== undefined) return `SIGTERM to pid ${meta.watch.pid}`;
  return 'nothing to signal (no pid was given): Shepherd just stops watching';
}

export interface WatchOperations {
  /** `watch slurm:<jobid>` or `watch <log> [--pid N]`: adopts the run and says how it is watched. */
  watch(target: WatchTarget, runName: string | undefined, threadId: string, actor: ChatUser): Promise<string>;
  /** `stop <watched run>`: posts the confirmation card; the button does the stop. */
  confirmStop(meta: RunMeta, actor: ChatUser): Promise<string>;
  onAction(action: InboundAction, verb: WatchVerb, token: string): Promise<ActionOutcome>;
}

export function createWatchOperations(options: WatchOperationsOptions): WatchOperations {
  const { runs, redis, prefix, notifier, logger } = options;
  // A decision card without a control job: the stop is applied off the click's answer, in this process.
  const confirmations = createDecisionStore(
    {
      name: 'stop-confirm',
      subject: stopConfirmationSchema,
      decision: stopDecisionSchema,
      keepSeconds: CONFIRM_TTL_S,
    },
    { redis, prefix, notifier },
  );

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

  /** A Kubernetes Job or an HF job started elsewhere: its backend follows its log into the run's output.log. */
  async function watchRemote(
    target: Extract<WatchTarget, { kind: 'kubernetes' | 'hfjobs' }>,
    runName: string | undefined,
    threadId: string,
    actor: ChatUser,
  ) {
    const kubernetes = target.kind === 'kubernetes';
    const label = kubernetes
      ? `Kubernetes Job ${target.namespace === undefined ? '' : `${target.namespace}/`}${target.job}`
      : `HF job ${target.jobId}`;
    const meta = await runs.adopt({
      name: runName ?? (kubernetes ? target.job : `hf-${target.jobId.slice(0, 12)}`),
      threadId,
      requester: actor,
      watch: kubernetes
        ? {
            source: 'kubernetes',
            namespace: target.namespace ?? options.kubernetesNamespace,
            job: target.job,
          }
        : { source: 'hfjobs', jobId: target.jobId, ...definedOnly({ namespace: target.namespace }) },
      ...(kubernetes ? {} : { jobId: target.jobId }),
      maxHours: WATCH_MAX_HOURS,
      description: label,
    });
    return `Watching ${label} as ${meta.name} (${meta.id}): its log flows into the thread's alerts, \`status ${meta.name}\` and \`chart ${meta.name}\`. Shepherd did not launch it, so it offers no fix or relaunch.`;
  }

  async function watch(target: WatchTarget, runName: string | undefined, threadId: string, actor: ChatUser) {
    if (target.kind === 'kubernetes' || target.kind === 'hfjobs') {
      return watchRemote(target, runName, threadId, actor);
    }
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
        { actionId: `${WATCH_ACTIONS.confirmStop}:${token}`, label: 'Stop it', style: 'danger' },
        { actionId: `${WATCH_ACTIONS.keepRunning}:${token}`, label: 'Keep it running' },
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
    await confirmations.save(token, { ...confirmation, cardMessageId: posted.messageId });
    logger.info({ runId: meta.id, by: actor.id }, 'stop of a watched run asked; waiting for confirmation');
    return `${meta.name} is a watched run: confirm on the card to stop it (${confirmation.what}).`;
  }

  function resolvedCard(confirmation: StopConfirmation, outcome: string): Card {
    const { actions: _actions, ...card } = confirmCard(confirmation, '');
    return { ...card, resolved: outcome };
  }

  /** The decision's effect; never throws, the outcome line says what happened. */
  async function applyStop(confirmation: StopConfirmation, decision: StopDecision): Promise<string> {
    const clock = `${decision.at.slice(11, 16)} UTC`;
    const who = decision.user.name;
    if (decision.verb === WATCH_ACTIONS.keepRunning) return `Kept running by ${who} at ${clock}`;
    try {
      await runs.stop(confirmation.runId, decision.user, `stopped from the thread (${confirmation.what})`);
      return `Stopped by ${who} at ${clock} (${confirmation.what})`;
    } catch (error) {
      logger.warn({ runId: confirmation.runId, err: error }, 'stop of a watched run failed');
      return `Stop by ${who} failed: ${errorMessage(error)}`;
    }
  }

  async function settle(token: string): Promise<void> {
    await confirmations.settle(token, {
      effect: applyStop,
      resolvedCard: (confirmation, _decision, outcome) => resolvedCard(confirmation, outcome),
    });
  }

  /** Deciding a stop card is stopping the run (or refusing to): checked and audited before it counts. */
  async function refusal(confirmation: StopConfirmation, action: InboundAction) {
    if (options.access === undefined) return undefined;
    const meta = await options.queries.find(confirmation.runId);
    return options.access.refusal(meta, action.user, action.threadId, 'stop', 'button');
  }

  /** Buttons `WATCH_ACTIONS` (`confirm-stop:<token>`, `keep-running:<token>`); the first click decides. */
  async function onAction(action: InboundAction, verb: WatchVerb, token: string): Promise<ActionOutcome> {
    return confirmations.click(token, {
      unknown: 'this confirmation has expired; send stop again',
      choose: async (confirmation) => {
        const refused = await refusal(confirmation, action);
        if (refused !== undefined) return { status: 'forbidden', message: refused };
        return { decision: { verb, user: action.user, at: new Date().toISOString() } };
      },
      lost: () => 'this was already decided',
      enqueue: async (_confirmation, decision) => {
        if (decision.verb === WATCH_ACTIONS.keepRunning) return settle(token);
        // The stop may wait out the grace period: answer the click now, report on the card.
        void settle(token).catch((error: unknown) => {
          logger.warn({ token, err: error }, 'stop confirmation not settled');
        });
      },
      accepted: (decision) => (decision.verb === WATCH_ACTIONS.keepRunning ? 'kept running' : 'stopping'),
    });
  }

  return { watch, confirmStop, onAction };
}
