import type { RunMeta } from '../runs/records/run-types.js';
import type { RunQueries } from '../runs/run-queries.js';
import { formatDollars, formatGpuHours, groupUsage, startOfMonthUtc, table, usageOf } from './usage.js';

/** `spend`, the monthly budget and the daily digest, all from the runs' real running time. */
export function createSpendReports(options: {
  runs: RunQueries;
  gpuHourUsd: number;
  budgetUsdMonth?: number | undefined;
  now?: () => Date;
}) {
  const now = options.now ?? (() => new Date());
  const runDir = (runId: string) => options.runs.runDirectory(runId);

  async function spentUsd(from: Date, to: Date): Promise<number> {
    const usages = await usageOf(await options.runs.list(), runDir, { from, to }, options.gpuHourUsd);
    return usages.reduce((sum, usage) => sum + usage.usd, 0);
  }

  async function spentThisMonth(at: Date): Promise<number> {
    return spentUsd(startOfMonthUtc(at), at);
  }

  async function report(days: number, by: 'person' | 'channel'): Promise<string> {
    const to = now();
    const from = new Date(to.getTime() - days * 86_400_000);
    const usages = await usageOf(await options.runs.list(), runDir, { from, to }, options.gpuHourUsd);
    const groups = groupUsage(usages, by);
    const period = `the last ${days} day${days === 1 ? '' : 's'}`;
    const lines = [`Spend over ${period} by ${by} (running time × GPUs × $${options.gpuHourUsd}/GPU-hour):`];
    if (groups.length === 0) lines.push('No GPU time in that period.');
    else {
      const total = groups.reduce(
        (sum, group) => ({
          runs: sum.runs + group.runs,
          gpuHours: sum.gpuHours + group.gpuHours,
          usd: sum.usd + group.usd,
        }),
        { runs: 0, gpuHours: 0, usd: 0 },
      );
      lines.push(
        table(
          [by, 'runs', 'GPU-hours', 'est. $'],
          [
            ...groups.map((group) => [
              group.key,
              String(group.runs),
              formatGpuHours(group.gpuHours),
              formatDollars(group.usd),
            ]),
            ['total', String(total.runs), formatGpuHours(total.gpuHours), formatDollars(total.usd)],
          ],
        ),
      );
    }
    if (options.budgetUsdMonth !== undefined) {
      const spent = await spentThisMonth(to);
      lines.push(
        `Monthly budget: ${formatDollars(spent)} of ${formatDollars(options.budgetUsdMonth)} spent this month, ${formatDollars(Math.max(0, options.budgetUsdMonth - spent))} left.`,
      );
    }
    return lines.join('\n');
  }

  /** The daily digest for the 24 hours up to `at`. */
  async function digest(at: Date, openApprovals: string[]): Promise<string> {
    const from = new Date(at.getTime() - 86_400_000);
    const all = await options.runs.list();
    const usages = await usageOf(all, runDir, { from, to: at }, options.gpuHourUsd);
    const names = (metas: RunMeta[]) =>
      metas.length === 0
        ? ''
        : `: ${metas
            .slice(0, 10)
            .map((meta) => meta.name)
            .join(', ')}${metas.length > 10 ? ', …' : ''}`;
    const started = usages.filter((usage) => usage.startedInWindow).map((usage) => usage.meta);
    const finished = usages
      .filter((usage) => usage.endedInWindow && usage.meta.status === 'completed')
      .map((usage) => usage.meta);
    const failed = usages
      .filter((usage) => usage.endedInWindow && usage.meta.status === 'failed')
      .map((usage) => usage.meta);
    const lines = [
      `Daily digest for ${from.toISOString().slice(0, 16).replace('T', ' ')} – ${at.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
      `• runs started: ${started.length}${names(started)}`,
      `• runs finished: ${finished.length}${names(finished)}`,
      `• runs failed: ${failed.length}${names(failed)}`,
    ];
    const groups = groupUsage(usages, 'person');
    if (groups.length === 0) lines.push('• GPU time: none');
    else
      lines.push(
        'GPU-hours and dollars by person:',
        table(
          ['person', 'runs', 'GPU-hours', 'est. $'],
          groups.map((group) => [
            group.key,
            String(group.runs),
            formatGpuHours(group.gpuHours),
            formatDollars(group.usd),
          ]),
        ),
      );
    lines.push(`• open approvals: ${openApprovals.length}`);
    for (const line of openApprovals.slice(0, 10)) lines.push(`  – ${line}`);
    if (options.budgetUsdMonth !== undefined) {
      const spent = await spentThisMonth(at);
      lines.push(
        `• budget: ${formatDollars(spent)} of ${formatDollars(options.budgetUsdMonth)} spent this month`,
      );
    }
    return lines.join('\n');
  }

  return { report, spentThisMonth, digest };
}

export type SpendReports = ReturnType<typeof createSpendReports>;
