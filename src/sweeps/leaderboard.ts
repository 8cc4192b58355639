import { join } from 'node:path';
import { readMetricSeries } from '../charts/metrics-chart.js';
import { RUN_FILES } from '../runs/records/run-files.js';
import { table } from '../spend/usage.js';
import { describeValues } from './sweep-grid.js';
import type { Sweep, Trial } from './sweep-store.js';

/** Best, final and count of one metric of one run (non-finite points are skipped for best/final). */
interface MetricSummary {
  points: Array<{ step: number; value: number }>;
  best?: { value: number; step: number };
  final?: { value: number; step: number };
  /** First step whose value is NaN or ±Inf. */
  firstNonFinite?: number;
  finiteCount: number;
}

export function summarise(
  points: Array<{ step: number; value: number }>,
  mode: 'min' | 'max',
): MetricSummary {
  const summary: MetricSummary = { points, finiteCount: 0 };
  for (const point of points) {
    if (!Number.isFinite(point.value)) {
      summary.firstNonFinite ??= point.step;
      continue;
    }
    summary.finiteCount += 1;
    summary.final = { value: point.value, step: point.step };
    const better =
      summary.best === undefined ||
      (mode === 'min' ? point.value < summary.best.value : point.value > summary.best.value);
    if (better) summary.best = { value: point.value, step: point.step };
  }
  return summary;
}

export async function readMetric(runDir: string, metric: string, steps?: { from: number; to: number }) {
  const series = await readMetricSeries(join(runDir, RUN_FILES.metrics), [metric], steps);
  return series[metric] ?? [];
}

export function formatValue(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  return Math.abs(value) >= 1000 || Number.isInteger(value) ? String(value) : value.toPrecision(4);
}

export interface LeaderboardRow {
  trial: Trial;
  summary: MetricSummary;
  status: string;
}

export function trialStatus(trial: Trial, runStatus: string | undefined): string {
  if (trial.stoppedEarly !== undefined) return `stopped early: ${trial.stoppedEarly}`;
  if (trial.state === 'waiting') return 'not started';
  return (trial.outcome ?? runStatus ?? 'unknown').replace('_', ' ');
}

/** Best first (by `mode`); trials without a value of the metric last, in grid order. */
export function rankRows(rows: LeaderboardRow[], mode: 'min' | 'max'): LeaderboardRow[] {
  return [...rows].sort((left, right) => {
    const a = left.summary.best?.value;
    const b = right.summary.best?.value;
    if (a === undefined && b === undefined) return left.trial.index - right.trial.index;
    if (a === undefined) return 1;
    if (b === undefined) return -1;
    return mode === 'min' ? a - b : b - a;
  });
}

export function leaderboardTable(sweep: Sweep, ranked: LeaderboardRow[]): string {
  const keys = [...new Set(sweep.trials.flatMap((trial) => Object.keys(trial.values)))];
  const rows = ranked.map((row, index) => [
    row.summary.best === undefined ? '-' : String(index + 1),
    row.trial.name,
    ...keys.map((key) => String(row.trial.values[key] ?? '')),
    row.summary.best === undefined ? '-' : formatValue(row.summary.best.value),
    row.summary.best === undefined ? '-' : String(row.summary.best.step),
    row.status,
  ]);
  return table(['#', 'trial', ...keys, `best ${sweep.metric} (${sweep.mode})`, 'step', 'status'], rows);
}

export function seriesLabel(trial: Trial): string {
  return `${trial.name} (${describeValues(trial.values)})`;
}
