import type { Actor } from '../runs/lifecycle/run-service.js';
import { TERMINAL_STATUSES } from '../runs/records/run-types.js';
import { readMetric, summarise } from './leaderboard.js';
import { SHEPHERD, type SweepContext } from './sweep-context.js';
import { postLeaderboard } from './sweep-report.js';
import { FINAL_SWEEP_STATES, type Sweep, type Trial } from './sweep-store.js';

/** Starts a trial's run; a run someone stopped before it started just counts as ended. */
async function launchTrial(context: SweepContext, trial: Trial, by: Actor): Promise<Trial> {
  try {
    await context.runs.approve(trial.runId, by);
    return { ...trial, state: 'launched' };
  } catch (error) {
    context.logger.info({ run: trial.name, err: error }, 'sweep trial could not start');
    const meta = await context.queries.find(trial.runId).catch(() => undefined);
    return { ...trial, state: 'ended', outcome: meta?.status ?? 'failed' };
  }
}

/** How many trials may run at once: the sweep's own cap, else as many as the host's GPUs allow. */
function trialCap(context: SweepContext, sweep: Sweep): number {
  if (sweep.parallel > 0) return sweep.parallel;
  if (sweep.gpus === 0 || context.gpuCapacity === undefined) return sweep.trials.length;
  return Math.max(1, Math.floor(context.gpuCapacity / sweep.gpus));
}

async function failCanary(context: SweepContext, sweep: Sweep, reason: string): Promise<Sweep> {
  const rest = sweep.trials.slice(1);
  for (const trial of rest) {
    if (trial.state === 'waiting')
      await context.runs
        .stop(trial.runId, SHEPHERD, `sweep ${sweep.name}: the canary failed`)
        .catch(() => undefined);
  }
  await context.say(
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

/** Marks the launched trials whose runs ended. */
async function recordEndedTrials(context: SweepContext, sweep: Sweep): Promise<Sweep> {
  const trials: Trial[] = [];
  for (const trial of sweep.trials) {
    if (trial.state !== 'launched') {
      trials.push(trial);
      continue;
    }
    const meta = await context.metaOf(trial);
    if (meta === undefined || TERMINAL_STATUSES.has(meta.status))
      trials.push({ ...trial, state: 'ended', outcome: meta?.status ?? 'failed' });
    else trials.push(trial);
  }
  return { ...sweep, trials };
}

/** While the canary runs alone: start it, fail the sweep on a bad canary, or let the rest start. */
async function judgeCanary(context: SweepContext, sweep: Sweep, by: Actor): Promise<Sweep> {
  const canary = sweep.trials[0] as Trial;
  if (canary.state === 'waiting') {
    return { ...sweep, trials: [await launchTrial(context, canary, by), ...sweep.trials.slice(1)] };
  }
  const points = await readMetric(context.queries.runDirectory(canary.runId), sweep.metric);
  const summary = summarise(points, sweep.mode);
  if (canary.stoppedEarly !== undefined)
    return failCanary(context, sweep, `was stopped early (${canary.stoppedEarly})`);
  if (summary.firstNonFinite !== undefined) {
    await context.runs
      .stop(canary.runId, SHEPHERD, `canary of sweep ${sweep.name}: NaN ${sweep.metric}`)
      .catch(() => undefined);
    const failed = await failCanary(
      context,
      sweep,
      `logged a non-finite ${sweep.metric} at step ${summary.firstNonFinite}`,
    );
    failed.trials[0] = {
      ...(failed.trials[0] as Trial),
      stoppedEarly: `NaN ${sweep.metric} at step ${summary.firstNonFinite}`,
    };
    return failed;
  }
  if (canary.state === 'ended' && canary.outcome !== 'completed') {
    const meta = await context.metaOf(canary);
    const how =
      meta?.exitCode !== undefined
        ? `crashed (exit code ${meta.exitCode})`
        : `ended ${canary.outcome ?? 'badly'}`;
    return failCanary(
      context,
      sweep,
      `${how}${summary.final ? ` after step ${summary.final.step}` : ' before logging a step'}`,
    );
  }
  if (summary.finiteCount >= sweep.canarySteps || canary.state === 'ended') {
    const running: Sweep = { ...sweep, state: 'running' };
    const rest = running.trials.length - 1;
    await context.say(
      running,
      `✅ ${running.name}: the canary ${canary.name} logged ${summary.finiteCount} healthy steps${canary.state === 'ended' ? ' and finished' : ''}; starting the other ${rest} trial${rest === 1 ? '' : 's'} (at most ${trialCap(context, running)} at once).`,
    );
    return running;
  }
  return sweep;
}

/** After the canary: start waiting trials while fewer than the cap are active; complete when all ended. */
async function startWaitingTrials(context: SweepContext, sweep: Sweep): Promise<Sweep> {
  let active = 0;
  for (const trial of sweep.trials) {
    if (trial.state !== 'launched') continue;
    const meta = await context.metaOf(trial);
    if (meta !== undefined && meta.status !== 'paused') active += 1;
  }
  const next: Trial[] = [];
  for (const trial of sweep.trials) {
    if (trial.state === 'waiting' && active < trialCap(context, sweep)) {
      const launched = await launchTrial(context, trial, SHEPHERD);
      if (launched.state === 'launched') active += 1;
      next.push(launched);
    } else next.push(trial);
  }
  const started: Sweep = { ...sweep, trials: next };
  return started.trials.every((trial) => trial.state === 'ended')
    ? { ...started, state: 'completed' }
    : started;
}

/** One orchestration step of a sweep: record ended trials, judge the canary, start trials, report. */
export async function advanceSweep(
  context: SweepContext,
  sweepId: string,
  by: Actor = SHEPHERD,
): Promise<void> {
  let report = false;
  await context.store.update(sweepId, async (original) => {
    if (original.state === 'pending_approval' || original.reportedAt !== undefined) return undefined;
    let sweep = await recordEndedTrials(context, original);
    if (sweep.state === 'canary') sweep = await judgeCanary(context, sweep, by);
    if (sweep.state === 'running') sweep = await startWaitingTrials(context, sweep);
    if (FINAL_SWEEP_STATES.has(sweep.state) && sweep.trials.every((trial) => trial.state === 'ended')) {
      report = true;
      sweep = { ...sweep, reportedAt: new Date().toISOString() };
    }
    return sweep;
  });
  if (report) await postLeaderboard(context, sweepId, true);
}
