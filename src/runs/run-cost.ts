import { RunError } from '../errors.js';

/** GPUs × hours × price, in cents precision. Never Infinity or NaN: an unbounded request is refused. */
export function estimateCostUsd(gpus: number, maxHours: number, gpuHourUsd: number): number {
  const cost = Math.round(gpus * maxHours * gpuHourUsd * 100) / 100;
  if (!Number.isFinite(cost) || cost < 0) {
    throw new RunError(
      'invalid_run',
      `cannot estimate the cost of ${gpus} GPUs for ${maxHours} h; ask for a bounded number of GPUs and hours`,
    );
  }
  return cost;
}

/** A run's estimate: its backend's hourly price when it has one (HF flavours, per-backend GPU-hour prices). */
export function estimateRunCostUsd(
  meta: { gpus: number; maxHours: number; hourlyUsd?: number },
  gpuHourUsd: number,
): number {
  if (meta.hourlyUsd === undefined) return estimateCostUsd(meta.gpus, meta.maxHours, gpuHourUsd);
  return estimateCostUsd(1, meta.maxHours, meta.hourlyUsd);
}
