import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import type { ApprovalService } from '../approvals/approval-service.js';
import type { Approval, Decision } from '../approvals/approval-store.js';
import type { ChatUser } from '../bot/chat-adapter.js';
import type { Notifier } from '../bot/notifier.js';
import { definedOnly } from '../defined-only.js';
import { errorMessage, RunError, ToolPolicyError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Incident } from '../monitor/types.js';
import { renderChart } from '../notify/charts/render-chart.js';
import { redactSecrets } from '../redact.js';
import { formatCommand, prepareCommand } from '../runs/command-launch.js';
import type { RunAccess } from '../runs/run-access.js';
import { estimateCostUsd } from '../runs/run-cost.js';
import type { Actor, RunService } from '../runs/run-service.js';
import { type RunMeta, TERMINAL_STATUSES } from '../runs/run-types.js';
import type { RunsFacade } from '../runs/runs-facade.js';
import { checkMaxHours } from '../runs/time-limit.js';
import { resolveWorkspaceScript } from '../runs/workspace-script.js';
import {
  formatValue,
  type LeaderboardRow,
  leaderboardTable,
  rankRows,
  readMetric,
  seriesLabel,
  summarise,
  trialStatus,
} from './leaderboard.js';
import { describeValues, expandGrid, MAX_TRIALS, type SweepSpec, trialArgs } from './sweep-grid.js';
import { FINAL_SWEEP_STATES, type Sweep, type SweepStore, type Trial } from './sweep-store.js';

/**
 * Sweeps: one card for the whole grid, a canary trial alone until it logged `canarySteps` healthy steps,
 * then the rest as the cap allows, bad trials stopped early with one line each, and a leaderboard with an
 * overlay chart at the end. Every step is driven by `advance`, which the periodic `run-schedule` control
 * job calls for each sweep in progress (state in Redis: a restart just carries on).
 */

export interface SweepServiceOptions {
  store: SweepStore;
  runs: RunService;
  facade: RunsFacade;
  approvals: ApprovalService;
  notifier: Notifier;
  workspace: string;
  gpuHourUsd: number;
  defaultMaxHours: number;
  maxHours: number;
  /** GPUs this host can hand out; undefined when a cluster allocates them (no default cap then). */
  gpuCapacity: number | undefined;
  quickchartUrl: string;
  logger: Logger;
  /** `py_compile` before the card (as for every run): resolves an error text, or undefined. */
  checkSyntax?: (source: string) => Promise<string | undefined>;
  /** Who may change a run: a sweep is changed by whoever may change its trials (checked on the canary). */
  access?: RunAccess;
}

const SHEPHERD: Actor = 'system';
/** Incidents that stop a trial early. */
const STOPPING: ReadonlySet<string> = new Set(['nan', 'divergence']);

export function createSweepService(options: SweepServiceOptions) {
  const { store, runs, notifier, logger } = options;

  function say(sweep: Sweep, text: string): Promise<unknown> {
    return notifier.post(sweep.threadId, text).catch((error: unknown) => {
      logger.warn({ sweep: sweep.name, err: errorMessage(error) }, 'could not post a sweep line');
    });
  }

  async function create(
    spec: SweepSpec,
    threadId: string,
    actor: ChatUser,
    origin: 'agent' | 'command',
    toolCall?: { name: string; input: unknown },
  ): Promise<string> {
    // A command is checked and resolved like `run -- …` (working directory, the .py file it names).
    const prepared =
      spec.command === undefined
        ? undefined
        : await prepareCommand(options.workspace, spec.command, undefined);
    const real =
      spec.script === undefined ? undefined : await resolveWorkspaceScript(options.workspace, spec.script);
    const script = real === undefined ? (prepared?.script ?? '') : await readFile(real, 'utf8');
    const launch =
      prepared === undefined
        ? undefined
        : {
            command: prepared.argv,
            cwd: prepared.cwd,
            ...definedOnly({ scriptPath: prepared.scriptPath }),
          };
    if (script.trim() !== '') {
      const syntaxError = await options.checkSyntax?.(script);
      if (syntaxError !== undefined)
        throw new ToolPolicyError(
          'script_syntax_error',
          `${spec.script ?? 'the script'}: ${syntaxError}\nNo approval card was posted.`,
        );
    }
    const values = expandGrid(spec.grid);
    if (values.length > MAX_TRIALS)
      throw new RunError('invalid_run', `that grid has ${values.length} trials; the limit is ${MAX_TRIALS}`);
    const base =
      real === undefined ? (prepared?.suggestedName ?? 'command') : basename(real).replace(/\.py$/, '');
    const name = spec.name ?? `${base.replace(/_/g, '-')}-sweep`;
    if ((await store.find(name)) !== undefined)
      throw new RunError('name_taken', `a sweep named ${name} already exists; pick another --name`);
    const gpus = spec.gpus ?? 0;
    const maxHours = checkMaxHours(spec.maxHours ?? options.defaultMaxHours, options.maxHours);
    const costUsd = estimateCostUsd(values.length * gpus, maxHours, options.gpuHourUsd);
    const trials: Trial[] = [];
    for (const [index, trialValues] of values.entries()) {
      const meta = await runs.createRun({
        name: `${name}-${index + 1}`,
        script,
        gpus,
        maxHours,
        threadId,
        requester: actor,
        config: { ...trialValues, sweep: name, trial: index + 1 },
        args: trialArgs(trialValues),
        ...definedOnly({ launch }),
      });
      trials.push({ index, name: meta.name, values: trialValues, runId: meta.id, state: 'waiting' });
    }
    const sweep = await store.create(
      {
        name,
        threadId,
        requester: actor,
        script: real ?? formatCommand(spec.command ?? []),
        gpus,
        maxHours,
        metric: spec.metric ?? 'loss',
        mode: spec.mode ?? 'min',
        canarySteps: spec.canarySteps ?? 20,
        parallel: spec.parallel ?? 0,
        state: 'pending_approval',
        trials,
      },
      new Date(),
    );
    const summary = [
      ...(prepared === undefined
        ? []
        : [`Command: \`${redactSecrets(formatCommand(prepared.argv))} --key value…\` in ${prepared.cwd}`]),
      `${trials.length} trials, the first one runs alone as a canary until it logged ${sweep.canarySteps} healthy steps; ${sweep.metric} is ${sweep.mode === 'min' ? 'minimised' : 'maximised'}.`,
      ...trials.map(
        (trial) =>
          `${trial.index + 1}. ${trial.name}: ${describeValues(trial.values)}${trial.index === 0 ? ' (canary)' : ''}`,
      ),
    ].join('\n');
    const { approval, autoApproved } = await options.approvals.requestSweep({
      sweepId: sweep.id,
      name,
      threadId,
      requester: actor,
      trials: trials.length,
      gpus,
      maxHours,
      costUsd,
      summary,
      scriptExcerpt: script,
      origin,
      ...definedOnly({ toolCall }),
    });
    await store.update(sweep.id, (current) => ({ ...current, approvalId: approval.id }));
    return autoApproved
      ? `Sweep ${name} (${trials.length} trials) was auto-approved (est. $${costUsd} in total); the canary ${trials[0]?.name} starts first.`
      : `Approval requested for sweep ${name}: ${trials.length} trials × ${gpus} GPU${gpus === 1 ? '' : 's'} × ${maxHours} h, est. $${costUsd} in total (approval ${approval.id}).`;
  }

  /** Applies the decision on the sweep's card (a control job; a retry finds the sweep already moved on). */
  async function onDecision(approval: Approval, decision: Decision): Promise<string> {
    const approved = decision.decision === 'approved';
    const by: Actor = decision.auto ? SHEPHERD : decision.user;
    const sweep = await store.update(approval.runId, (current) => {
      if (current.state !== 'pending_approval') return undefined;
      return approved
        ? { ...current, state: 'canary' }
        : {
            ...current,
            state: 'rejected',
            reason: decision.decision === 'expired' ? 'approval expired' : 'rejected',
          };
    });
    if (!approved) {
      for (const trial of sweep.trials)
        await runs.reject(trial.runId, by, `sweep ${sweep.name} not approved`).catch(() => undefined);
      await store.update(sweep.id, (current) => ({
        ...current,
        trials: current.trials.map((trial) => ({ ...trial, state: 'ended', outcome: 'rejected' })),
        reportedAt: new Date().toISOString(),
      }));
      return 'no trial will run';
    }
    await advance(sweep.id, by);
    const canary = sweep.trials[0];
    return `the canary ${canary?.name} (${describeValues(canary?.values ?? {})}) starts alone; the other ${sweep.trials.length - 1} wait for ${sweep.canarySteps} healthy steps`;
  }

  /** Starts a trial's run; a run someone stopped before it started just counts as ended. */
  async function launch(trial: Trial, by: Actor): Promise<Trial> {
    try {
      await runs.approve(trial.runId, by);
      return { ...trial, state: 'launched' };
    } catch (error) {
      logger.info({ run: trial.name, err: errorMessage(error) }, 'sweep trial could not start');
      const meta = await runs.findRun(trial.runId).catch(() => undefined);
      return { ...trial, state: 'ended', outcome: meta?.status ?? 'failed' };
    }
  }

  async function metaOf(trial: Trial): Promise<RunMeta | undefined> {
    return runs.findRun(trial.runId).catch(() => undefined);
  }

  function capOf(sweep: Sweep): number {
    if (sweep.parallel > 0) return sweep.parallel;
    if (sweep.gpus === 0 || options.gpuCapacity === undefined) return sweep.trials.length;
    return Math.max(1, Math.floor(options.gpuCapacity / sweep.gpus));
  }

  /** Stops a trial early (NaN / divergence): recorded with its reason, one line in the thread. */
  async function stopEarly(sweepId: string, runId: string, reason: string): Promise<void> {
    let stopped: Trial | undefined;
    const sweep = await store.update(sweepId, (current) => {
      const trial = current.trials.find((candidate) => candidate.runId === runId);
      if (trial === undefined || trial.stoppedEarly !== undefined || trial.state === 'ended')
        return undefined;
      stopped = { ...trial, stoppedEarly: reason };
      return {
        ...current,
        trials: current.trials.map((candidate) =>
          candidate.runId === runId ? (stopped as Trial) : candidate,
        ),
      };
    });
    if (stopped === undefined) return;
    await runs
      .stop(runId, SHEPHERD, `stopped early by sweep ${sweep.name}: ${reason}`)
      .catch((error: unknown) => {
        logger.info({ runId, err: errorMessage(error) }, 'early stop found the trial already ended');
      });
    await say(
      sweep,
      `⚠️ ${sweep.name}: trial ${stopped.name} (${describeValues(stopped.values)}) stopped early — ${reason}.`,
    );
  }

  /** The monitor's incidents on a trial: handled here (no card, no triage). Returns false for other runs. */
  async function onIncident(incident: Incident, meta: RunMeta): Promise<boolean> {
    const sweepId = await store.sweepOfRun(meta.id);
    if (sweepId === undefined) return false;
    const sweep = await store.get(sweepId);
    if (sweep === undefined) return false;
    const trial = sweep.trials.find((candidate) => candidate.runId === meta.id);
    // A trial stopped early (or by a person) ends with a signal: that is not a crash worth a line.
    if (trial === undefined || trial.stoppedEarly !== undefined || meta.status === 'stopped') return true;
    const where = incident.step === undefined ? '' : ` at step ${incident.step}`;
    if (STOPPING.has(incident.kind)) {
      await stopEarly(sweepId, meta.id, `${incident.kind === 'nan' ? 'NaN' : 'divergence'}${where}`);
    } else if (incident.kind === 'stall') {
      await say(sweep, `⚠️ ${sweep.name}: trial ${trial.name} has stalled — ${incident.summary}`);
    } else if (incident.kind === 'crash' && trial.index !== 0) {
      await say(
        sweep,
        `⚠️ ${sweep.name}: trial ${trial.name} crashed${where}${incident.crashClass ? ` (${incident.crashClass})` : ''}.`,
      );
    }
    return true;
  }

  async function failCanary(sweep: Sweep, reason: string): Promise<Sweep> {
    const rest = sweep.trials.slice(1);
    for (const trial of rest) {
      if (trial.state === 'waiting')
        await runs
          .stop(trial.runId, SHEPHERD, `sweep ${sweep.name}: the canary failed`)
          .catch(() => undefined);
    }
    await say(
      sweep,
      `🛑 Sweep ${sweep.name} stopped: the canary ${sweep.trials[0]?.name} ${reason}, so the other ${rest.length} trial${rest.length === 1 ? '' : 's'} never start.`,
    );
    return {
      ...sweep,
      state: 'failed',
      reason: `canary ${reason}`,
      trials: sweep.trials.map((trial) =>
        trial.state === 'waiting' ? { ...trial, state: 'ended', outcome: 'not started' } : trial,
      ),
    };
  }

  /** One orchestration step of a sweep: record ended trials, judge the canary, start trials, report. */
  async function advance(sweepId: string, by: Actor = SHEPHERD): Promise<void> {
    let report = false;
    await store.update(sweepId, async (original) => {
      let sweep = original;
      if (sweep.state === 'pending_approval' || sweep.reportedAt !== undefined) return undefined;
      // Record the trials whose runs ended.
      const trials: Trial[] = [];
      for (const trial of sweep.trials) {
        if (trial.state !== 'launched') {
          trials.push(trial);
          continue;
        }
        const meta = await metaOf(trial);
        if (meta === undefined || TERMINAL_STATUSES.has(meta.status))
          trials.push({ ...trial, state: 'ended', outcome: meta?.status ?? 'failed' });
        else trials.push(trial);
      }
      sweep = { ...sweep, trials };
      const canary = sweep.trials[0] as Trial;

      if (sweep.state === 'canary') {
        if (canary.state === 'waiting') {
          sweep = { ...sweep, trials: [await launch(canary, by), ...sweep.trials.slice(1)] };
        } else {
          const points = await readMetric(options.facade.runDirectory(canary.runId), sweep.metric);
          const summary = summarise(points, sweep.mode);
          if (canary.stoppedEarly !== undefined)
            sweep = await failCanary(sweep, `was stopped early (${canary.stoppedEarly})`);
          else if (summary.firstNonFinite !== undefined) {
            await runs
              .stop(canary.runId, SHEPHERD, `canary of sweep ${sweep.name}: NaN ${sweep.metric}`)
              .catch(() => undefined);
            sweep = await failCanary(
              sweep,
              `logged a non-finite ${sweep.metric} at step ${summary.firstNonFinite}`,
            );
            sweep.trials[0] = {
              ...(sweep.trials[0] as Trial),
              stoppedEarly: `NaN ${sweep.metric} at step ${summary.firstNonFinite}`,
            };
          } else if (canary.state === 'ended' && canary.outcome !== 'completed') {
            const meta = await metaOf(canary);
            const how =
              meta?.exitCode !== undefined
                ? `crashed (exit code ${meta.exitCode})`
                : `ended ${canary.outcome ?? 'badly'}`;
            sweep = await failCanary(
              sweep,
              `${how}${summary.final ? ` after step ${summary.final.step}` : ' before logging a step'}`,
            );
          } else if (summary.finiteCount >= sweep.canarySteps || canary.state === 'ended') {
            sweep = { ...sweep, state: 'running' };
            const rest = sweep.trials.length - 1;
            await say(
              sweep,
              `✅ ${sweep.name}: the canary ${canary.name} logged ${summary.finiteCount} healthy steps${canary.state === 'ended' ? ' and finished' : ''}; starting the other ${rest} trial${rest === 1 ? '' : 's'} (at most ${capOf(sweep)} at once).`,
            );
          }
        }
      }

      if (sweep.state === 'running') {
        let active = 0;
        for (const trial of sweep.trials) {
          if (trial.state !== 'launched') continue;
          const meta = await metaOf(trial);
          if (meta !== undefined && meta.status !== 'paused') active += 1;
        }
        const next: Trial[] = [];
        for (const trial of sweep.trials) {
          if (trial.state === 'waiting' && active < capOf(sweep)) {
            const launched = await launch(trial, SHEPHERD);
            if (launched.state === 'launched') active += 1;
            next.push(launched);
          } else next.push(trial);
        }
        sweep = { ...sweep, trials: next };
        if (sweep.trials.every((trial) => trial.state === 'ended')) sweep = { ...sweep, state: 'completed' };
      }
      if (FINAL_SWEEP_STATES.has(sweep.state) && sweep.trials.every((trial) => trial.state === 'ended')) {
        report = true;
        sweep = { ...sweep, reportedAt: new Date().toISOString() };
      }
      return sweep;
    });
    if (report) await postLeaderboard(sweepId, true);
  }

  async function leaderboardRows(sweep: Sweep): Promise<LeaderboardRow[]> {
    const rows: LeaderboardRow[] = [];
    for (const trial of sweep.trials) {
      const points = await readMetric(options.facade.runDirectory(trial.runId), sweep.metric);
      const meta = trial.state === 'ended' ? undefined : await metaOf(trial);
      rows.push({ trial, summary: summarise(points, sweep.mode), status: trialStatus(trial, meta?.status) });
    }
    return rankRows(rows, sweep.mode);
  }

  function header(sweep: Sweep): string {
    const state = sweep.state.replace('_', ' ');
    return `Sweep ${sweep.name}: ${state}${sweep.reason ? ` (${sweep.reason})` : ''} — ${sweep.trials.length} trials, ${sweep.metric} (${sweep.mode})`;
  }

  /** The table (and, at the end, the overlay chart with the best trial drawn thick). */
  async function postLeaderboard(sweepId: string, final: boolean): Promise<void> {
    const sweep = await store.get(sweepId);
    if (sweep === undefined) return;
    const ranked = await leaderboardRows(sweep);
    const best = ranked[0]?.summary.best === undefined ? undefined : ranked[0];
    const lines = [
      final ? `🏁 ${header(sweep)}. Leaderboard, best first:` : header(sweep),
      leaderboardTable(sweep, ranked),
    ];
    if (best?.summary.best !== undefined)
      lines.push(
        `Best: ${best.trial.name} (${describeValues(best.trial.values)}) with ${sweep.metric} ${formatValue(best.summary.best.value)} at step ${best.summary.best.step}.`,
      );
    await notifier.post(sweep.threadId, lines.join('\n'));
    if (!final) return;
    const series: Record<string, Array<{ step: number; value: number }>> = {};
    for (const row of ranked)
      if (row.summary.points.length > 0) series[seriesLabel(row.trial)] = row.summary.points;
    if (Object.keys(series).length === 0) return;
    try {
      const png = await renderChart(
        {
          runName: sweep.name,
          series,
          title: `${sweep.name} — ${sweep.metric} of ${Object.keys(series).length} trials${best ? ` (best: ${best.trial.name})` : ''}`,
          ...(best === undefined ? {} : { emphasize: seriesLabel(best.trial) }),
        },
        { quickchartUrl: options.quickchartUrl },
      );
      await notifier.upload(sweep.threadId, {
        filename: `${sweep.name}-${sweep.metric}.png`.replace(/[^\w.-]/g, '_'),
        contentType: 'image/png',
        data: png,
        title: `${sweep.name}: ${sweep.metric} of all trials`,
        comment: `${sweep.metric} of all ${sweep.name} trials${best ? `; the best, ${best.trial.name}, is drawn thick` : ''}`,
      });
    } catch (error) {
      logger.warn({ sweep: sweep.name, err: errorMessage(error) }, 'sweep chart failed');
    }
  }

  async function find(reference: string): Promise<Sweep> {
    const sweep = await store.find(reference);
    if (sweep === undefined) throw new RunError('run_not_found', `no sweep named ${reference}`);
    return sweep;
  }

  async function status(reference: string): Promise<string> {
    const sweep = await find(reference);
    const ranked = await leaderboardRows(sweep);
    return [header(sweep), leaderboardTable(sweep, ranked)].join('\n');
  }

  async function authorize(
    sweep: Sweep,
    actor: ChatUser,
    threadId: string,
    change: 'pause' | 'resume' | 'stop',
  ) {
    const canary = sweep.trials[0];
    const meta = canary === undefined ? undefined : await metaOf(canary);
    if (meta !== undefined) await options.access?.authorize(meta, actor, threadId, change, 'command');
  }

  async function pause(reference: string, actor: ChatUser, threadId: string): Promise<string> {
    const found = await find(reference);
    await authorize(found, actor, threadId, 'pause');
    if (found.state !== 'canary' && found.state !== 'running')
      throw new RunError(
        'illegal_transition',
        `sweep ${found.name} is ${found.state.replace('_', ' ')}; only a sweep in progress can be paused`,
      );
    const sweep = await store.update(found.id, (current) =>
      current.state === 'canary' || current.state === 'running'
        ? { ...current, state: 'paused', pausedFrom: current.state }
        : undefined,
    );
    let paused = 0;
    for (const trial of sweep.trials) {
      if (trial.state !== 'launched') continue;
      const meta = await metaOf(trial);
      if (meta?.status === 'running' || meta?.status === 'queued') {
        await runs.pause(trial.runId, actor).then(
          () => (paused += 1),
          () => undefined,
        );
      }
    }
    return `Paused sweep ${sweep.name}: ${paused} running trial${paused === 1 ? '' : 's'} paused, nothing new starts until you resume it.`;
  }

  async function resume(reference: string, actor: ChatUser, threadId: string): Promise<string> {
    const found = await find(reference);
    await authorize(found, actor, threadId, 'resume');
    if (found.state !== 'paused')
      throw new RunError(
        'illegal_transition',
        `sweep ${found.name} is ${found.state.replace('_', ' ')}, not paused`,
      );
    const sweep = await store.update(found.id, (current) =>
      current.state === 'paused' ? { ...current, state: current.pausedFrom ?? 'running' } : undefined,
    );
    let resumed = 0;
    // The sweep's card approved these trials' GPUs and hours; resuming them needs no new card.
    for (const trial of sweep.trials) {
      if (trial.state !== 'launched') continue;
      const meta = await metaOf(trial);
      if (meta?.status === 'paused')
        await runs.resume(trial.runId, actor).then(
          () => (resumed += 1),
          () => undefined,
        );
    }
    await advance(sweep.id);
    return `Resumed sweep ${sweep.name}: ${resumed} trial${resumed === 1 ? '' : 's'} resumed; the others start as before.`;
  }

  async function stop(reference: string, actor: ChatUser, threadId: string): Promise<string> {
    const found = await find(reference);
    await authorize(found, actor, threadId, 'stop');
    if (FINAL_SWEEP_STATES.has(found.state))
      throw new RunError('illegal_transition', `sweep ${found.name} is already ${found.state}`);
    const sweep = await store.update(found.id, (current) =>
      FINAL_SWEEP_STATES.has(current.state)
        ? undefined
        : { ...current, state: 'stopped', reason: `stopped by ${actor.name}` },
    );
    for (const trial of sweep.trials) {
      const meta = await metaOf(trial);
      if (meta !== undefined && !TERMINAL_STATUSES.has(meta.status))
        await runs.stop(trial.runId, actor, `sweep ${sweep.name} stopped`).catch(() => undefined);
    }
    await store.update(sweep.id, (current) => ({
      ...current,
      trials: current.trials.map((trial) =>
        trial.state === 'waiting' ? { ...trial, state: 'ended', outcome: 'not started' } : trial,
      ),
    }));
    await advance(sweep.id);
    return `Stopped sweep ${sweep.name}.`;
  }

  /** The periodic step: every sweep in progress advances. */
  async function tick(): Promise<void> {
    for (const sweep of await store.active()) {
      await advance(sweep.id).catch((error: unknown) => {
        logger.warn({ sweep: sweep.name, err: errorMessage(error) }, 'sweep step failed; retried next tick');
      });
    }
  }

  return {
    create,
    onDecision,
    onIncident,
    tick,
    status,
    pause,
    resume,
    stop,
    isSweep: async (reference: string) => (await store.find(reference)) !== undefined,
    isTrial: async (runId: string) => (await store.sweepOfRun(runId)) !== undefined,
  };
}

export type SweepService = ReturnType<typeof createSweepService>;
