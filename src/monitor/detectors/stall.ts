import type { ProcessState } from '../../runs/executor.js';

/** Stall: the process is alive but no new step for max(stallS, 10 × median step interval). */

interface StallVerdict {
  stalled: boolean;
  idleMs: number;
  limitMs: number;
}

export function checkStall(input: {
  state: ProcessState;
  now: number;
  /** When the step last advanced; else when the run started or was first watched. */
  lastProgressAt: number | undefined;
  medianStepIntervalMs: number | undefined;
  stallS: number;
}): StallVerdict {
  const limitMs = Math.max(input.stallS * 1000, 10 * (input.medianStepIntervalMs ?? 0));
  if (input.state.kind !== 'alive' || input.lastProgressAt === undefined) {
    return { stalled: false, idleMs: 0, limitMs };
  }
  const idleMs = input.now - input.lastProgressAt;
  return { stalled: idleMs >= limitMs, idleMs, limitMs };
}
