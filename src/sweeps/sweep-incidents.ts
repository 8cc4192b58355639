import type { Incident } from '../monitor/types.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { SHEPHERD, type SweepContext } from './sweep-context.js';
import { describeValues } from './sweep-grid.js';
import type { Trial } from './sweep-store.js';

/** Incidents that stop a trial early. */
const STOPPING: ReadonlySet<string> = new Set(['nan', 'divergence']);

/** Stops a trial early (NaN / divergence): recorded with its reason, one line in the thread. */
async function stopEarly(
  context: SweepContext,
  sweepId: string,
  runId: string,
  reason: string,
): Promise<void> {
  let stopped: Trial | undefined;
  const sweep = await context.store.update(sweepId, (current) => {
    const trial = current.trials.find((candidate) => candidate.runId === runId);
    if (trial === undefined || trial.stoppedEarly !== undefined || trial.state === 'ended') return undefined;
    stopped = { ...trial, stoppedEarly: reason };
    return {
      ...current,
      trials: current.trials.map((candidate) => (candidate.runId === runId ? (stopped as Trial) : candidate)),
    };
  });
  if (stopped === undefined) return;
  await context.runs
    .stop(runId, SHEPHERD, `stopped early by sweep ${sweep.name}: ${reason}`)
    .catch((error: unknown) => {
      context.logger.info({ runId, err: error }, 'early stop found the trial already ended');
    });
  await context.say(
    sweep,
    `⚠️ ${sweep.name}: trial ${stopped.name} (${describeValues(stopped.values)}) stopped early — ${reason}.`,
  );
}

/** The monitor's incidents on a trial: handled here (no card, no triage). Returns false for other runs. */
export async function handleTrialIncident(
  context: SweepContext,
  incident: Incident,
  meta: RunMeta,
): Promise<boolean> {
  const sweepId = await context.store.sweepOfRun(meta.id);
  if (sweepId === undefined) return false;
  const sweep = await context.store.get(sweepId);
  if (sweep === undefined) return false;
  const trial = sweep.trials.find((candidate) => candidate.runId === meta.id);
  // A trial stopped early (or by a person) ends with a signal: that is not a crash worth a line.
  if (trial === undefined || trial.stoppedEarly !== undefined || meta.status === 'stopped') return true;
  const where = incident.step === undefined ? '' : ` at step ${incident.step}`;
  if (STOPPING.has(incident.kind)) {
    await stopEarly(context, sweepId, meta.id, `${incident.kind === 'nan' ? 'NaN' : 'divergence'}${where}`);
  } else if (incident.kind === 'stall') {
    await context.say(sweep, `⚠️ ${sweep.name}: trial ${trial.name} has stalled — ${incident.summary}`);
  } else if (incident.kind === 'crash' && trial.index !== 0) {
    await context.say(
      sweep,
      `⚠️ ${sweep.name}: trial ${trial.name} crashed${where}${incident.crashClass ? ` (${incident.crashClass})` : ''}.`,
    );
  }
  return true;
}
