import type { ChatUser } from '../bot/chat-adapter.js';
import { RunError } from '../errors.js';
import { TERMINAL_STATUSES } from '../runs/records/run-types.js';
import type { SweepContext } from './sweep-context.js';
import { advanceSweep } from './sweep-progress.js';
import { FINAL_SWEEP_STATES, type Sweep } from './sweep-store.js';

/** Pause, resume and stop a whole sweep; each checks the actor against the canary's run. */

async function authorize(
  context: SweepContext,
  sweep: Sweep,
  actor: ChatUser,
  threadId: string,
  change: 'pause' | 'resume' | 'stop',
): Promise<void> {
  const canary = sweep.trials[0];
  const meta = canary === undefined ? undefined : await context.metaOf(canary);
  if (meta !== undefined) await context.access?.authorize(meta, actor, threadId, change, 'command');
}

export async function pauseSweep(
  context: SweepContext,
  found: Sweep,
  actor: ChatUser,
  threadId: string,
): Promise<string> {
  await authorize(context, found, actor, threadId, 'pause');
  if (found.state !== 'canary' && found.state !== 'running')
    throw new RunError(
      'illegal_transition',
      `sweep ${found.name} is ${found.state.replace('_', ' ')}; only a sweep in progress can be paused`,
    );
  const sweep = await context.store.update(found.id, (current) =>
    current.state === 'canary' || current.state === 'running'
      ? { ...current, state: 'paused', pausedFrom: current.state }
      : undefined,
  );
  let paused = 0;
  for (const trial of sweep.trials) {
    if (trial.state !== 'launched') continue;
    const meta = await context.metaOf(trial);
    if (meta?.status === 'running' || meta?.status === 'queued') {
      await context.runs.pause(trial.runId, actor).then(
        () => (paused += 1),
        () => undefined,
      );
    }
  }
  return `Paused sweep ${sweep.name}: ${paused} running trial${paused === 1 ? '' : 's'} paused, nothing new starts until you resume it.`;
}

export async function resumeSweep(
  context: SweepContext,
  found: Sweep,
  actor: ChatUser,
  threadId: string,
): Promise<string> {
  await authorize(context, found, actor, threadId, 'resume');
  if (found.state !== 'paused')
    throw new RunError(
      'illegal_transition',
      `sweep ${found.name} is ${found.state.replace('_', ' ')}, not paused`,
    );
  const sweep = await context.store.update(found.id, (current) =>
    current.state === 'paused' ? { ...current, state: current.pausedFrom ?? 'running' } : undefined,
  );
  let resumed = 0;
  // The sweep's card approved these trials' GPUs and hours; resuming them needs no new card.
  for (const trial of sweep.trials) {
    if (trial.state !== 'launched') continue;
    const meta = await context.metaOf(trial);
    if (meta?.status === 'paused')
      await context.runs.resume(trial.runId, actor).then(
        () => (resumed += 1),
        () => undefined,
      );
  }
  await advanceSweep(context, sweep.id);
  return `Resumed sweep ${sweep.name}: ${resumed} trial${resumed === 1 ? '' : 's'} resumed; the others start as before.`;
}

export async function stopSweep(
  context: SweepContext,
  found: Sweep,
  actor: ChatUser,
  threadId: string,
): Promise<string> {
  await authorize(context, found, actor, threadId, 'stop');
  if (FINAL_SWEEP_STATES.has(found.state))
    throw new RunError('illegal_transition', `sweep ${found.name} is already ${found.state}`);
  const sweep = await context.store.update(found.id, (current) =>
    FINAL_SWEEP_STATES.has(current.state)
      ? undefined
      : { ...current, state: 'stopped', reason: `stopped by ${actor.name}` },
  );
  for (const trial of sweep.trials) {
    const meta = await context.metaOf(trial);
    if (meta !== undefined && !TERMINAL_STATUSES.has(meta.status))
      await context.runs.stop(trial.runId, actor, `sweep ${sweep.name} stopped`).catch(() => undefined);
  }
  await context.store.update(sweep.id, (current) => ({
    ...current,
    trials: current.trials.map((trial) =>
      trial.state === 'waiting' ? { ...trial, state: 'ended', outcome: 'not started' } : trial,
    ),
  }));
  await advanceSweep(context, sweep.id);
  return `Stopped sweep ${sweep.name}.`;
}
