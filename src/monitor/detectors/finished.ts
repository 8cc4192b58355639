import type { ProcessState } from '../../runs/executor.js';

/** Finished: a clean exit (code 0, no executor verdict). The summary lists final metrics and duration. */
export function isCleanFinish(state: ProcessState): boolean {
  return state.kind === 'exited' && state.exitCode === 0 && state.crashClass === undefined;
}

export function formatDuration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  const rest = seconds % 60;
  if (hours > 0) return `${hours} h ${minutes} min`;
  if (minutes > 0) return `${minutes} min ${rest} s`;
  return `${rest} s`;
}

export function formatMetricValue(value: number): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity';
  if (value !== 0 && (Math.abs(value) < 1e-3 || Math.abs(value) >= 1e6)) return value.toExponential(3);
  return String(Number(value.toPrecision(5)));
}

/** "loss 0.123, accuracy 0.91" — at most `limit` metrics, loss-like ones first. */
export function summariseMetrics(metrics: Record<string, number>, limit = 6): string {
  const entries = Object.entries(metrics).sort(([a], [b]) => {
    const aLoss = /loss/i.test(a) ? 0 : 1;
    const bLoss = /loss/i.test(b) ? 0 : 1;
    return aLoss - bLoss || a.localeCompare(b);
  });
  return entries
    .slice(0, limit)
    .map(([name, value]) => `${name} ${formatMetricValue(value)}`)
    .join(', ');
}
