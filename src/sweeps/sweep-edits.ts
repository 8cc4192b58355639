import type { Decision } from '../approvals/approval-store.js';
import { RunError } from '../errors.js';
import type { Actor } from '../runs/lifecycle/run-service.js';
import type { SweepContext } from './sweep-context.js';
import type { Sweep } from './sweep-store.js';

/**
 * Edit on a sweep's card: GPUs and hours per trial and the sweep's name, checked on every trial the way a
 * run's edit is (GPUs the backend can give, hours within `SHEPHERD_MAX_HOURS`, free trial names), and
 * applied to every trial (each audited before → after) and the sweep record before the canary starts.
 */

type SweepEdit = NonNullable<Decision['edits']>['after'];

/** A trial's name follows its sweep's: `<sweep>-<n>`. */
const trialName = (sweepName: string, index: number) => `${sweepName}-${index + 1}`;

async function pendingSweep(context: SweepContext, sweepId: string): Promise<Sweep> {
  const sweep = await context.store.get(sweepId);
  if (sweep === undefined) throw new RunError('run_not_found', `no sweep ${sweepId}`);
  if (sweep.state !== 'pending_approval')
    throw new RunError('illegal_transition', `sweep ${sweep.name} is ${sweep.state}; it cannot be edited`);
  return sweep;
}

/** The edit as it would be applied, or a thrown `RunError` with a sentence for the approver. */
export async function checkSweepEdit(
  context: SweepContext,
  sweepId: string,
  edit: Partial<SweepEdit>,
): Promise<SweepEdit> {
  const sweep = await pendingSweep(context, sweepId);
  const name = edit.name ?? sweep.name;
  if (!/^[a-z0-9][a-z0-9-]{0,59}$/i.test(name))
    throw new RunError('invalid_run', `a sweep name is letters, digits and dashes (got "${name}")`);
  if (name !== sweep.name && ((await context.store.find(name))?.id ?? sweep.id) !== sweep.id)
    throw new RunError('name_taken', `a sweep named ${name} already exists; pick another name`);
  let checked: SweepEdit = { gpus: sweep.gpus, maxHours: sweep.maxHours, name };
  for (const trial of sweep.trials) {
    const values = await context.runs.checkRevision(trial.runId, {
      ...(edit.gpus === undefined ? {} : { gpus: edit.gpus }),
      ...(edit.maxHours === undefined ? {} : { maxHours: edit.maxHours }),
      name: trialName(name, trial.index),
    });
    checked = { gpus: values.gpus, maxHours: values.maxHours, name };
  }
  return checked;
}

/** Applies the approved edit to every trial and the sweep (a retried job finds them already edited). */
export async function applySweepEdit(
  context: SweepContext,
  sweepId: string,
  edit: SweepEdit,
  by: Actor,
  approver: string,
): Promise<void> {
  const sweep = await pendingSweep(context, sweepId);
  const why = `sweep edited on the approval card by ${approver}`;
  for (const trial of sweep.trials)
    await context.runs.revise(
      trial.runId,
      { gpus: edit.gpus, maxHours: edit.maxHours, name: trialName(edit.name, trial.index) },
      by,
      why,
    );
  if (edit.name !== sweep.name) await context.store.rename(sweep.id, edit.name);
  await context.store.update(sweep.id, (current) => ({
    ...current,
    gpus: edit.gpus,
    maxHours: edit.maxHours,
    trials: current.trials.map((trial) => ({ ...trial, name: trialName(edit.name, trial.index) })),
  }));
}
