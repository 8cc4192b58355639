import { createReadStream, existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Notifier } from '../bot/notifier.js';
import { metricsFileOf } from '../runs/derived-file.js';
import { parseMetricLine } from '../runs/metric-line.js';
import type { RunQueries } from '../runs/run-queries.js';
import { renderChart } from './render-chart.js';

export interface ChartRequest {
  run: string;
  metrics?: string[];
  steps?: { from: number; to: number };
  threadId: string;
}

type Series = Record<string, Array<{ step: number; value: number }>>;

function formatStep(step: number): string {
  return step === Number.MAX_SAFE_INTEGER ? 'end' : String(step);
}

/** Reads the requested metrics (all numeric ones when none are named) within a step range, streaming. */
export async function readMetricSeries(
  metricsPath: string,
  wanted: readonly string[] | undefined,
  steps: { from: number; to: number } | undefined,
): Promise<Series> {
  const series: Series = {};
  if (!existsSync(metricsPath)) return series;
  const lines = createInterface({
    input: createReadStream(metricsPath, 'utf8'),
    crlfDelay: Number.POSITIVE_INFINITY,
  });
  let index = 0;
  for await (const line of lines) {
    if (line.trim() === '') continue;
    const parsed = parseMetricLine(line);
    if (!parsed.ok) continue;
    const step = parsed.point.step ?? index;
    index += 1;
    if (steps !== undefined && (step < steps.from || step > steps.to)) continue;
    for (const [name, value] of Object.entries(parsed.point.metrics)) {
      if (wanted !== undefined && wanted.length > 0 && !wanted.includes(name)) continue;
      let points = series[name];
      if (points === undefined) {
        points = [];
        series[name] = points;
      }
      points.push({ step, value });
    }
  }
  return series;
}

/**
 * The `chart` command and `show_metrics` tool: renders a run's metrics (LTTB-downsampled) and uploads the
 * PNG into the thread. Returns a sentence for the thread or the model.
 */
export function createMetricsCharts(options: {
  queries: RunQueries;
  notifier: Notifier;
  quickchartUrl: string;
}) {
  return async function postChart(request: ChartRequest): Promise<string> {
    const meta = await options.queries.find(request.run);
    // The helper's metrics.jsonl, else the points the monitor parsed from output.log.
    const { path } = await metricsFileOf(options.queries.runDirectory(meta.id));
    const wanted = request.metrics !== undefined && request.metrics.length > 0 ? request.metrics : ['loss'];
    let series = await readMetricSeries(path, wanted, request.steps);
    if (Object.keys(series).length === 0 && (request.metrics === undefined || request.metrics.length === 0)) {
      // No `loss`: chart whatever the run logs.
      series = await readMetricSeries(path, undefined, request.steps);
    }
    const names = Object.keys(series);
    if (names.length === 0) {
      const range =
        request.steps === undefined ? '' : ` between steps ${request.steps.from} and ${request.steps.to}`;
      return `${meta.name} has no ${request.metrics?.join(', ') || ''} metrics${range} yet.`.replace(
        '  ',
        ' ',
      );
    }
    const png = await renderChart({ runName: meta.name, series }, { quickchartUrl: options.quickchartUrl });
    const points = names.reduce((sum, name) => sum + (series[name]?.length ?? 0), 0);
    const range =
      request.steps === undefined ? '' : `, steps ${request.steps.from}..${formatStep(request.steps.to)}`;
    const caption = `Chart of ${names.join(', ')} for ${meta.name} (${points} points${range})`;
    await options.notifier.upload(request.threadId, {
      filename: `${meta.name}-${names.join('-')}.png`.replace(/[^\w.-]/g, '_'),
      contentType: 'image/png',
      data: png,
      title: `${meta.name}: ${names.join(', ')}`,
      comment: caption,
    });
    return `${caption} posted in the thread.`;
  };
}
