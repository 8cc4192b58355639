import { renderChart } from '../charts/render-chart.js';
import {
  formatValue,
  type LeaderboardRow,
  leaderboardTable,
  rankRows,
  readMetric,
  seriesLabel,
  summarise,
  trialStatus,
} from './leaderboard.js';
import type { SweepContext } from './sweep-context.js';
import { describeValues } from './sweep-grid.js';
import type { Sweep } from './sweep-store.js';

async function leaderboardRows(context: SweepContext, sweep: Sweep): Promise<LeaderboardRow[]> {
  const rows: LeaderboardRow[] = [];
  for (const trial of sweep.trials) {
    const points = await readMetric(context.queries.runDirectory(trial.runId), sweep.metric);
    const meta = trial.state === 'ended' ? undefined : await context.metaOf(trial);
    rows.push({ trial, summary: summarise(points, sweep.mode), status: trialStatus(trial, meta?.status) });
  }
  return rankRows(rows, sweep.mode);
}

function header(sweep: Sweep): string {
  const state = sweep.state.replace('_', ' ');
  return `Sweep ${sweep.name}: ${state}${sweep.reason ? ` (${sweep.reason})` : ''} — ${sweep.trials.length} trials, ${sweep.metric} (${sweep.mode})`;
}

/** The overlay chart of every trial's metric, the best trial drawn thick; a failed chart is only logged. */
async function postOverlayChart(
  context: SweepContext,
  sweep: Sweep,
  ranked: LeaderboardRow[],
  best: LeaderboardRow | undefined,
): Promise<void> {
  const series: Record<string, Array<{ step: number; value: number }>> = {};
  for (const row of ranked)
    if (row.summary.points.length > 0) series[seriesLabel(row.trial)] = row.summary.points;
  if (Object.keys(series).length === 0) return;
  try {
    const png = await renderChart(
      {
        runName: sweep.name,
        series,
        title: `${sweep.name} — ${sweep.metric} of ${Object.keys(series).length} trials${best ? ` (best: ${best.trial.name})` : ''}`,
        ...(best === undefined ? {} : { emphasize: seriesLabel(best.trial) }),
      },
      { quickchartUrl: context.quickchartUrl },
    );
    await context.notifier.upload(sweep.threadId, {
      filename: `${sweep.name}-${sweep.metric}.png`.replace(/[^\w.-]/g, '_'),
      contentType: 'image/png',
      data: png,
      title: `${sweep.name}: ${sweep.metric} of all trials`,
      comment: `${sweep.metric} of all ${sweep.name} trials${best ? `; the best, ${best.trial.name}, is drawn thick` : ''}`,
    });
  } catch (error) {
    context.logger.warn({ sweep: sweep.name, err: error }, 'sweep chart failed');
  }
}

/** The table (and, at the end, the overlay chart with the best trial drawn thick). */
export async function postLeaderboard(context: SweepContext, sweepId: string, final: boolean): Promise<void> {
  const sweep = await context.store.get(sweepId);
  if (sweep === undefined) return;
  const ranked = await leaderboardRows(context, sweep);
  const best = ranked[0]?.summary.best === undefined ? undefined : ranked[0];
  const lines = [
    final ? `🏁 ${header(sweep)}. Leaderboard, best first:` : header(sweep),
    leaderboardTable(sweep, ranked),
  ];
  if (best?.summary.best !== undefined)
    lines.push(
      `Best: ${best.trial.name} (${describeValues(best.trial.values)}) with ${sweep.metric} ${formatValue(best.summary.best.value)} at step ${best.summary.best.step}.`,
    );
  await context.notifier.post(sweep.threadId, lines.join('\n'));
  if (final) await postOverlayChart(context, sweep, ranked, best);
}

/** The header and the leaderboard so far, as text. */
export async function sweepStatus(context: SweepContext, sweep: Sweep): Promise<string> {
  const ranked = await leaderboardRows(context, sweep);
  return [header(sweep), leaderboardTable(sweep, ranked)].join('\n');
}
