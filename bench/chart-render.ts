/**
 * Chart rendering cost. Prints chart_render_ms_1m_points: LTTB of a 1,000,000-point loss series (with a
 * spike and NaN points) down to 500 points plus a local Chart.js/@napi-rs/canvas PNG render, median of 5
 * after one warm-up (goal ≤ 300 ms). Run: npx tsx bench/chart-render.ts
 */
import { renderChart } from '../src/charts/render-chart.js';

/** Benchmarks print `name=value` lines on stdout. */
function print(line: string): void {
  process.stdout.write(`${line}\n`);
}

const count = 1_000_000;
const points = new Array<{ step: number; value: number }>(count);
for (let step = 0; step < count; step++) {
  let value = (3 / Math.sqrt(1 + step / 1000)) * (1 + 0.02 * Math.sin(step * 0.37));
  if (step === 654_321) value = 40;
  if (step % 250_000 === 7) value = Number.NaN;
  points[step] = { step, value };
}

await renderChart(
  { runName: 'warm-up', series: { loss: points.slice(0, 1000) } },
  { quickchartUrl: 'local' },
);
const times: number[] = [];
let bytes = 0;
for (let round = 0; round < 5; round++) {
  const started = performance.now();
  const png = await renderChart(
    { runName: 'bench', series: { loss: points }, highlightSteps: [654_000, 655_000] },
    { quickchartUrl: 'local' },
  );
  times.push(performance.now() - started);
  bytes = png.length;
}
times.sort((a, b) => a - b);
print(`chart_render_ms_1m_points=${(times[2] ?? Number.NaN).toFixed(1)}`);
print(`chart_png_bytes=${bytes}`);
