import { RunError } from '../errors.js';

/** "2 h", "1.5 h", "30 min", "4 s": a max-hours value as people say it. */
export function formatHours(hours: number): string {
  if (!Number.isFinite(hours)) return `${hours} h`;
  if (hours >= 1) return `${Number(hours.toFixed(2))} h`;
  const minutes = hours * 60;
  if (minutes >= 1) return `${Number(minutes.toFixed(1))} min`;
  return `${Math.max(1, Math.round(minutes * 60))} s`;
}

/**
 * A run's max hours must be a finite positive number no larger than `SHEPHERD_MAX_HOURS`: it is the
 * time limit the executor enforces and the factor of the cost estimate, so Infinity or NaN would make
 * an unbounded run with a meaningless card. Throws `invalid_run` with a sentence for the user.
 */
export function checkMaxHours(value: unknown, limit: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new RunError('invalid_run', `max hours must be a positive number (got ${String(value)})`);
  }
  if (value > limit) {
    throw new RunError(
      'invalid_run',
      `max hours ${value} is above this deployment's limit of ${limit} h (SHEPHERD_MAX_HOURS)`,
    );
  }
  return value;
}

/** The message a thread gets when a run is stopped at its limit. */
export function timeLimitMessage(name: string, maxHours: number): string {
  return `${name} stopped at its ${formatHours(maxHours)} limit; resume to continue`;
}

/** Extra time past the deadline before Shepherd itself ends a run the launcher did not end. */
export const DEADLINE_SLACK_MS = 30_000;

/**
 * Hours the current launch may run: the approved max hours less what earlier launches under the same
 * approval ran (automatic relaunches share one budget). Executors set their deadlines from it.
 */
export function hoursLeft(meta: { maxHours: number; priorHours?: number }): number {
  return Math.max(0, meta.maxHours - (meta.priorHours ?? 0));
}
