import { createCanvas } from '@napi-rs/canvas';
import {
  Chart,
  type ChartConfiguration,
  Filler,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  type Plugin,
  PointElement,
  ScatterController,
  Title,
} from 'chart.js';
import type { BuiltChart } from './chart-config.js';

/** In-process PNG rendering with Chart.js on @napi-rs/canvas: no network, no metric leaves the machine. */

let registered = false;
function registerOnce(): void {
  if (registered) return;
  // Only what the builder uses (tree-shaken Chart.js: line + scatter, linear axes, title, legend, fill).
  Chart.register(
    LineController,
    ScatterController,
    LineElement,
    PointElement,
    LinearScale,
    Title,
    Legend,
    Filler,
  );
  Chart.defaults.font.family = 'DejaVu Sans, Helvetica, Arial, sans-serif';
  registered = true;
}

function backgroundPlugin(color: string): Plugin {
  return {
    id: 'shepherdBackground',
    beforeDraw(chart) {
      const { ctx, width, height } = chart;
      ctx.save();
      ctx.globalCompositeOperation = 'destination-over';
      ctx.fillStyle = color;
      ctx.fillRect(0, 0, width, height);
      ctx.restore();
    },
  };
}

export async function renderLocal(built: BuiltChart): Promise<Uint8Array> {
  registerOnce();
  const canvas = createCanvas(built.width, built.height);
  const config = {
    ...built.config,
    plugins: [...(built.config.plugins ?? []), backgroundPlugin(built.backgroundColor)],
  } as ChartConfiguration;
  // Chart.js picks its DOM-free BasicPlatform in Node and only needs `getContext('2d')` from the canvas.
  // biome-ignore lint/suspicious/noExplicitAny: the napi canvas is structurally a canvas, not a DOM type
  const chart = new Chart(canvas as any, config);
  try {
    return new Uint8Array(await canvas.encode('png'));
  } finally {
    chart.destroy();
  }
}
