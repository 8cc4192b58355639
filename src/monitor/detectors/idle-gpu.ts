/**
 * Idle GPUs: while the run's process is alive, every GPU it holds is under `idleGpuUtilPercent` %
 * utilisation (from nvidia-smi) for `idleGpuMin` minutes. A probe that is unavailable (no nvidia-smi, an
 * error) tells nothing and neither starts nor ends the idle period.
 */

export interface IdleGpuSettings {
  idleGpuMin: number;
  idleGpuUtilPercent: number;
}

export function observeIdleGpus(
  state: { idleSince?: number },
  utilisation: ReadonlyArray<number> | undefined,
  now: number,
  settings: IdleGpuSettings,
): { idle: boolean; idleMs: number } {
  if (utilisation === undefined || utilisation.length === 0) {
    return { idle: false, idleMs: state.idleSince === undefined ? 0 : now - state.idleSince };
  }
  if (utilisation.every((percent) => percent < settings.idleGpuUtilPercent)) {
    state.idleSince ??= now;
    const idleMs = now - state.idleSince;
    return { idle: idleMs >= settings.idleGpuMin * 60_000, idleMs };
  }
  delete state.idleSince;
  return { idle: false, idleMs: 0 };
}
