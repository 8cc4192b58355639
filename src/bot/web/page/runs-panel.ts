import { api, byId, hasExtension, make } from './dom.js';
import type { MetricValue, RunRow } from './types.js';

/** The runs panel in the sidebar: one row per run with its status, GPUs, step and a loss sparkline. */

const SVG = 'http://www.w3.org/2000/svg';
let loadSeq = 0;

export function finite(value: MetricValue | undefined): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/** A small SVG line of the last loss values; non-finite values break the line and get a red dot. */
function sparkline(values: MetricValue[]): SVGSVGElement {
  const width = 80;
  const height = 20;
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'sparkline');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('width', String(width));
  svg.setAttribute('height', String(height));
  svg.dataset.points = String(values.length);
  const numbers = values.filter(finite);
  if (numbers.length === 0 && values.length === 0) return svg;
  const low = Math.min(...numbers);
  const high = Math.max(...numbers);
  const span = high - low || 1;
  const x = (index: number) =>
    values.length === 1 ? width / 2 : (index / (values.length - 1)) * (width - 2) + 1;
  const y = (value: number) => height - 2 - ((value - low) / span) * (height - 4);
  let path = '';
  let pen = false;
  values.forEach((value, index) => {
    if (!finite(value)) {
      pen = false;
      const dot = document.createElementNS(SVG, 'circle');
      dot.setAttribute('class', 'spark-bad');
      dot.setAttribute('cx', x(index).toFixed(1));
      dot.setAttribute('cy', String(height / 2));
      dot.setAttribute('r', '1.8');
      svg.append(dot);
      return;
    }
    path += `${pen ? 'L' : 'M'}${x(index).toFixed(1)} ${y(value).toFixed(1)} `;
    pen = true;
  });
  const line = document.createElementNS(SVG, 'path');
  line.setAttribute('d', path.trim());
  line.setAttribute('class', 'spark-line');
  svg.prepend(line);
  return svg;
}

function renderRow(run: RunRow): HTMLElement {
  const row = make('button', 'run-row');
  row.type = 'button';
  row.dataset.testid = 'run-row';
  row.dataset.runId = run.id;
  row.dataset.status = run.status;
  const top = make('span', 'run-top');
  top.append(make('span', 'run-name', run.name), make('span', `run-status status-${run.status}`, run.status));
  const info = make('span', 'run-info');
  const gpus = run.gpus === 0 ? 'CPU' : `${run.gpus} GPU${run.gpus === 1 ? '' : 's'}`;
  info.append(make('span', 'run-gpus', gpus));
  info.append(make('span', 'run-step', run.step === undefined ? 'no steps yet' : `step ${run.step}`));
  row.append(top, info);
  if (run.loss !== undefined && run.loss.length > 0) {
    const spark = make('span', 'run-spark');
    spark.title = `last ${run.loss.length} values of ${run.lossMetric ?? 'loss'}`;
    spark.append(sparkline(run.loss));
    const last = run.loss.at(-1);
    spark.append(make('span', 'run-loss', finite(last) ? last.toPrecision(4) : String(last)));
    row.append(spark);
  }
  row.addEventListener('click', () => {
    location.hash = `#run/${encodeURIComponent(run.id)}`;
  });
  return row;
}

export async function loadRuns(): Promise<void> {
  if (!hasExtension('runs')) {
    byId('runs-panel').hidden = true;
    return;
  }
  const seq = ++loadSeq;
  const result = await api<{ runs: RunRow[] }>('GET', '/api/runs');
  if (seq !== loadSeq) return;
  const box = byId('runs');
  if (!result.ok || !Array.isArray(result.data.runs)) {
    // A playground without the core (or an older one) has no runs API: say so quietly.
    box.replaceChildren(make('p', 'empty', result.status === 404 ? 'no runs here' : 'runs unavailable'));
    return;
  }
  const rows = result.data.runs;
  box.replaceChildren(...(rows.length === 0 ? [make('p', 'empty', 'no runs yet')] : rows.map(renderRow)));
}
