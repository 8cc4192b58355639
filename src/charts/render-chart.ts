import { definedOnly } from '../defined-only.js';
import { buildChart, type ChartInput } from './chart-config.js';
import { renderLocal } from './render-local.js';
import { renderWithQuickChart } from './render-quickchart.js';

export { ChartRenderError, isPng } from './render-quickchart.js';

/**
 * Render a metrics chart to PNG bytes: in-process when `quickchartUrl` is `local` (the default, no metric
 * leaves the machine), otherwise by the QuickChart server at that URL.
 */
export async function renderChart(
  input: ChartInput,
  options: { quickchartUrl: string; fetch?: typeof fetch; timeoutMs?: number } = { quickchartUrl: 'local' },
): Promise<Uint8Array> {
  const built = buildChart(input);
  if (options.quickchartUrl === 'local') return renderLocal(built);
  return renderWithQuickChart(built, {
    url: options.quickchartUrl,
    ...definedOnly({ fetch: options.fetch, timeoutMs: options.timeoutMs }),
  });
}
