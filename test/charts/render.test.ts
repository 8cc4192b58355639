import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createCanvas, loadImage } from '@napi-rs/canvas';
import { describe, expect, it } from 'vitest';
import { buildChart } from '../../src/charts/chart-config.js';
import { ChartRenderError, isPng, renderChart } from '../../src/charts/render-chart.js';

function lossSeries(count: number) {
  return Array.from({ length: count }, (_, step) => ({
    step,
    value: step === 700 ? Number.NaN : step === 400 ? 30 : 3 / Math.sqrt(1 + step / 10),
  }));
}

async function pixelStats(png: Uint8Array) {
  const image = await loadImage(Buffer.from(png));
  const canvas = createCanvas(image.width, image.height);
  const context = canvas.getContext('2d');
  context.drawImage(image, 0, 0);
  const { data } = context.getImageData(0, 0, image.width, image.height);
  let sum = 0;
  let sumSquares = 0;
  let transparent = 0;
  let red = 0;
  const pixels = data.length / 4;
  for (let index = 0; index < data.length; index += 4) {
    const luminance = ((data[index] ?? 0) + (data[index + 1] ?? 0) + (data[index + 2] ?? 0)) / 3;
    sum += luminance;
    sumSquares += luminance * luminance;
    if ((data[index + 3] ?? 0) < 255) transparent++;
    if ((data[index] ?? 0) > 200 && (data[index + 1] ?? 0) < 80 && (data[index + 2] ?? 0) < 80) red++;
  }
  const mean = sum / pixels;
  return {
    width: image.width,
    height: image.height,
    variance: sumSquares / pixels - mean * mean,
    transparent,
    red,
  };
}

describe('chart config', () => {
  it('labels the axes with step and the metric and is a QuickChart config', () => {
    const built = buildChart({
      runName: 'qwen',
      series: { loss: lossSeries(2000) },
      highlightSteps: [390, 410],
    });
    const options = built.config.options as {
      scales: Record<string, { title: { text: string; display: boolean } }>;
    };
    expect(options.scales.x?.title).toMatchObject({ display: true, text: 'step' });
    expect(options.scales.y?.title).toMatchObject({ display: true, text: 'loss' });
    const datasets = built.config.data.datasets;
    expect(datasets.map((dataset) => dataset.label)).toEqual(['loss', 'loss NaN/Inf', 'incident']);
    expect(datasets[0]?.data.length).toBeLessThanOrEqual(500);
    const post = built.quickChart.getPostData();
    expect(post).toMatchObject({
      width: 800,
      height: 400,
      format: 'png',
      version: '4',
      backgroundColor: '#ffffff',
    });
    expect(post.chart).toContain('step');
  });
});

describe('renderChart', () => {
  it('renders locally: decodes, has the requested size, opaque, not blank, NaN marker drawn', async () => {
    const png = await renderChart(
      { runName: 'qwen-gsm8k-sft', series: { loss: lossSeries(5000) }, width: 640, height: 320 },
      { quickchartUrl: 'local' },
    );
    expect(isPng(png)).toBe(true);
    const stats = await pixelStats(png);
    expect(stats).toMatchObject({ width: 640, height: 320, transparent: 0 });
    expect(stats.variance).toBeGreaterThan(50);
    expect(stats.red).toBeGreaterThan(10);
  });

  it('renders a dark two-metric chart with its own axes', async () => {
    const png = await renderChart(
      {
        runName: 'run',
        series: {
          loss: lossSeries(300),
          lr: lossSeries(300).map((point) => ({ step: point.step, value: 1e-4 })),
        },
        theme: 'dark',
      },
      { quickchartUrl: 'local' },
    );
    const stats = await pixelStats(png);
    expect(stats).toMatchObject({ width: 800, height: 400, transparent: 0 });
    expect(stats.variance).toBeGreaterThan(50);
  });

  it('posts the config to a QuickChart server and returns its PNG; errors are typed', async () => {
    const local = await renderChart(
      { runName: 'x', series: { loss: lossSeries(100) } },
      { quickchartUrl: 'local' },
    );
    const bodies: Array<Record<string, unknown>> = [];
    let fail = false;
    const server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => {
        body += chunk;
      });
      request.on('end', () => {
        bodies.push({ url: request.url, method: request.method, ...JSON.parse(body) });
        if (fail) {
          response.writeHead(400).end('bad chart');
          return;
        }
        response.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from(local));
      });
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const png = await renderChart(
        { runName: 'remote', series: { loss: lossSeries(100) } },
        { quickchartUrl: url },
      );
      expect(Buffer.from(png).equals(Buffer.from(local))).toBe(true);
      expect(bodies[0]).toMatchObject({
        url: '/chart',
        method: 'POST',
        width: 800,
        height: 400,
        format: 'png',
      });
      expect(String(bodies[0]?.chart)).toContain('remote');
      fail = true;
      const error = await renderChart(
        { runName: 'r', series: { loss: lossSeries(10) } },
        { quickchartUrl: url },
      ).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(ChartRenderError);
      expect(error).toMatchObject({ code: 'chart_http', status: 400 });
    } finally {
      server.close();
    }
    const unreachable = await renderChart(
      { runName: 'r', series: { loss: lossSeries(10) } },
      { quickchartUrl: 'http://127.0.0.1:1' },
    ).catch((caught: unknown) => caught);
    expect(unreachable).toMatchObject({ code: 'chart_network' });
  });
});
