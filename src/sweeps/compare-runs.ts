import type { Notifier } from '../bot/notifier.js';
import { renderChart } from '../charts/render-chart.js';
import { RunError } from '../errors.js';
import type { RunMeta } from '../runs/records/run-types.js';
import type { RunQueries } from '../runs/run-queries.js';
import { table } from '../spend/usage.js';
import { formatValue, readMetric, summarise } from './leaderboard.js';

interface CompareRequest {
  /** Run names or ids; the last word may instead be the metric (when it names no run). */
  references: string[];
  metric?: string;
  steps?: { from: number; to: number };
  mode?: 'min' | 'max';
  threadId: string;
}

/** Higher is better for these; everything else (loss, perplexity, error) is minimised. */
const MAXIMISED = /acc|f1|auc|bleu|rouge|score|reward|precision|recall|map|em$/i;

/** A fork compared with its parent: where it branched, so a reader knows the curves share steps. */
function forkNotes(metas: readonly RunMeta[]): string[] {
  return metas.flatMap((meta) => {
    const parent =
      meta.forkOf === undefined ? undefined : metas.find((other) => other.id === meta.forkOf?.runId);
    return parent === undefined || meta.forkOf === undefined
      ? []
      : [
          `${meta.name} is a fork of ${parent.name} from step ${meta.forkOf.step}: aligned on step, it branches off there.`,
        ];
  });
}

/**
 * `compare` and the `compare_runs` tool: one overlay chart of a metric aligned on step, and a table of
 * each run's final and best value.
 */
export function createRunComparison(options: {
  queries: RunQueries;
  notifier: Notifier;
  quickchartUrl: string;
}) {
  return async function compare(request: CompareRequest): Promise<string> {
    const references = [...request.references];
    let metric = request.metric;
    const metas: RunMeta[] = [];
    for (const [index, reference] of references.entries()) {
      try {
        metas.push(await options.queries.find(reference));
      } catch (error) {
        // `compare a b acc`: a last word that is no run is the metric.
        if (metric === undefined && index === references.length - 1 && index >= 2) metric = reference;
        else throw error;
      }
    }
    const [only] = metas;
    if (metas.length === 1 && only?.forkOf !== undefined)
      metas.push(await options.queries.find(only.forkOf.runId));
    if (metas.length < 2)
      throw new RunError(
        'invalid_run',
        'compare needs at least two runs (or one fork, compared with its parent)',
      );
    const name = metric ?? 'loss';
    const mode = request.mode ?? (MAXIMISED.test(name) ? 'max' : 'min');
    const series: Record<string, Array<{ step: number; value: number }>> = {};
    const rows: string[][] = [];
    let best: { run: string; value: number } | undefined;
    for (const meta of metas) {
      const points = await readMetric(options.queries.runDirectory(meta.id), name, request.steps);
      const summary = summarise(points, mode);
      if (points.length > 0) series[meta.name] = points;
      rows.push([
        meta.name,
        meta.status.replace('_', ' '),
        summary.final === undefined ? '-' : `${formatValue(summary.final.value)} @${summary.final.step}`,
        summary.best === undefined ? '-' : `${formatValue(summary.best.value)} @${summary.best.step}`,
        String(points.length),
      ]);
      if (
        summary.best !== undefined &&
        (best === undefined ||
          (mode === 'min' ? summary.best.value < best.value : summary.best.value > best.value))
      )
        best = { run: meta.name, value: summary.best.value };
    }
    const range =
      request.steps === undefined
        ? ''
        : `, steps ${request.steps.from}..${request.steps.to === Number.MAX_SAFE_INTEGER ? 'end' : request.steps.to}`;
    const text = [
      `Comparison of ${name} (${mode === 'min' ? 'lower' : 'higher'} is better${range}):`,
      table(['run', 'status', `final ${name}`, `best ${name}`, 'points'], rows),
      ...(best === undefined ? [] : [`Best: ${best.run} (${formatValue(best.value)}).`]),
      ...forkNotes(metas),
    ].join('\n');
    if (Object.keys(series).length === 0)
      return `${text}\nNone of these runs logged ${name}${range} yet, so there is no chart.`;
    const png = await renderChart(
      {
        runName: metas.map((meta) => meta.name).join(' vs '),
        series,
        title: `${name}: ${metas.map((meta) => meta.name).join(' vs ')}`,
        ...(best === undefined ? {} : { emphasize: best.run }),
      },
      { quickchartUrl: options.quickchartUrl },
    );
    await options.notifier.upload(request.threadId, {
      filename: `compare-${name}.png`.replace(/[^\w.-]/g, '_'),
      contentType: 'image/png',
      data: png,
      title: `${name} of ${metas.length} runs`,
      comment: `${name} of ${metas.map((meta) => meta.name).join(', ')}, aligned on step`,
    });
    return text;
  };
}

export type CompareRuns = ReturnType<typeof createRunComparison>;
