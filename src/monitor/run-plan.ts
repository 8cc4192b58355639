import type { RunMeta } from '../runs/records/run-types.js';

/**
 * The run's planned number of steps, when something told us: the run config (`config()` in the helper,
 * the Trainer callback's `max_steps`) or a recorded total (e.g. a tqdm bar's total, `meta.maxSteps`).
 * One place so every source feeds the detectors the same way.
 */
const CONFIG_KEYS = ['max_steps', 'total_steps', 'num_train_steps', 'train_steps', 'max_iters'];

export function plannedMaxSteps(meta: RunMeta): number | undefined {
  const recorded = (meta as RunMeta & { maxSteps?: unknown }).maxSteps;
  if (typeof recorded === 'number' && Number.isFinite(recorded) && recorded > 0) return recorded;
  const config = meta.config ?? {};
  for (const key of CONFIG_KEYS) {
    const value = config[key];
    const number = typeof value === 'string' ? Number(value) : value;
    if (typeof number === 'number' && Number.isFinite(number) && number > 0) return number;
  }
  return undefined;
}
