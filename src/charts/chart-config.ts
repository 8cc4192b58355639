import type { ChartConfiguration, ChartDataset } from 'chart.js';
import quickChartModule from 'quickchart-js';
import { DEFAULT_MAX_POINTS, downsampleSeries, type SeriesPoint } from './lttb.js';

// quickchart-js ships CJS typings for an ESM build: TypeScript sees the class under `.default`, Node's
// ESM loader hands it over directly. Accept both.
type QuickChartClass = typeof quickChartModule.default;
const QuickChart: QuickChartClass =
  (quickChartModule as unknown as { default?: QuickChartClass }).default ??
  (quickChartModule as unknown as QuickChartClass);
type QuickChartInstance = InstanceType<QuickChartClass>;

/**
 * The one chart builder: a Chart.js configuration (plain data, no functions, so a QuickChart server can
 * render it too) wrapped in a `QuickChart` object. Each metric is a line over a linear "step" axis;
 * NaN/Inf points are red crosses at the top (or bottom, for -Inf) edge of the series; an optional step
 * range is shaded; the background is opaque so the image reads in dark mode.
 */

export interface ChartInput {
  runName: string;
  series: Record<string, SeriesPoint[]>;
  highlightSteps?: [number, number] | undefined;
  width?: number | undefined;
  height?: number | undefined;
  theme?: 'light' | 'dark' | undefined;
  maxPoints?: number | undefined;
  /** Overlay charts (sweeps, compare): the series drawn thick, the others thin. */
  emphasize?: string | undefined;
  /** Replaces the default "<run> — <metrics>" title. */
  title?: string | undefined;
}

export interface BuiltChart {
  config: ChartConfiguration;
  quickChart: QuickChartInstance;
  width: number;
  height: number;
  backgroundColor: string;
  textColor: string;
}

const COLORS = ['#2563eb', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#be185d'];
const MARKER_COLOR = '#dc2626';
const THEMES = {
  light: { background: '#ffffff', text: '#1f2937', grid: 'rgba(0,0,0,0.1)' },
  dark: { background: '#1e1f22', text: '#e5e7eb', grid: 'rgba(255,255,255,0.15)' },
} as const;

type Point = { x: number; y: number };

type Dataset = ChartDataset<'line' | 'scatter', Point[]>;
type Theme = (typeof THEMES)[keyof typeof THEMES];
/** The value range of a series on its axis (what the markers and the highlight band are placed against). */
type AxisRange = { axis: string; min: number; max: number };

/** One line per metric (plus its NaN/Inf markers), the value range of each and the steps they span. */
function seriesDatasets(input: ChartInput, names: string[], ownAxes: boolean) {
  const datasets: Dataset[] = [];
  const ranges: AxisRange[] = [];
  let minStep = Number.POSITIVE_INFINITY;
  let maxStep = Number.NEGATIVE_INFINITY;

  names.forEach((name, index) => {
    const { line, markers } = downsampleSeries(
      input.series[name] ?? [],
      input.maxPoints ?? DEFAULT_MAX_POINTS,
    );
    const axis = ownAxes && index === 1 ? 'y1' : 'y';
    const color = COLORS[index % COLORS.length] as string;
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    for (const point of line) {
      if (point.value < min) min = point.value;
      if (point.value > max) max = point.value;
    }
    for (const point of [...line, ...markers]) {
      if (point.step < minStep) minStep = point.step;
      if (point.step > maxStep) maxStep = point.step;
    }
    if (!Number.isFinite(min)) {
      min = 0;
      max = 1;
    }
    ranges.push({ axis, min, max });
    datasets.push({
      type: 'line',
      label: name,
      data: line.map((point) => ({ x: point.step, y: point.value })),
      borderColor: color,
      backgroundColor: color,
      borderWidth: input.emphasize === undefined ? 1.5 : name === input.emphasize ? 4 : 1,
      pointRadius: line.length <= 60 ? 2 : 0,
      tension: 0,
      fill: false,
      yAxisID: axis,
    });
    if (markers.length > 0) {
      const margin = (max - min) * 0.05 || Math.abs(max) * 0.05 || 0.05;
      datasets.push({
        type: 'scatter',
        label: `${name} NaN/Inf`,
        data: markers.map((point) => ({
          x: point.step,
          y: point.value === Number.NEGATIVE_INFINITY ? min - margin : max + margin,
        })),
        borderColor: MARKER_COLOR,
        backgroundColor: MARKER_COLOR,
        pointStyle: 'crossRot',
        pointRadius: 7,
        pointBorderWidth: 2.5,
        yAxisID: axis,
      });
    }
  });
  return { datasets, ranges, minStep, maxStep };
}

/** The shaded incident band over `steps`, on the first series' axis. */
function highlightDataset(
  steps: [number, number],
  range: AxisRange,
  minStep: number,
  maxStep: number,
): Dataset {
  let [from, to] = steps;
  // A single step would be an invisible band: widen it to ~1% of the visible step range.
  const span = Number.isFinite(maxStep - minStep) ? maxStep - minStep : 1;
  if (to - from < span * 0.01) {
    from -= span * 0.005 || 0.5;
    to += span * 0.005 || 0.5;
  }
  const top = range.max + (range.max - range.min) * 0.08;
  return {
    type: 'line',
    label: 'incident',
    data: [
      { x: from, y: top },
      { x: to, y: top },
    ],
    borderWidth: 0,
    pointRadius: 0,
    backgroundColor: 'rgba(245,158,11,0.25)',
    borderColor: 'rgba(245,158,11,0)',
    fill: 'start',
    yAxisID: range.axis,
  };
}

/** The step axis and one value axis, or two when two metrics each get their own. */
function chartScales(names: string[], ownAxes: boolean, theme: Theme): Record<string, unknown> {
  const axisTitle = (text: string) => ({ display: true, text, color: theme.text, font: { size: 13 } });
  const ticks = { color: theme.text };
  const grid = { color: theme.grid };
  const scales: Record<string, unknown> = {
    x: { type: 'linear', title: axisTitle('step'), ticks, grid },
    y: {
      type: 'linear',
      position: 'left',
      title: axisTitle(ownAxes ? (names[0] ?? 'value') : names.join(', ')),
      ticks,
      grid,
    },
  };
  if (ownAxes && names.length === 2) {
    scales.y1 = {
      type: 'linear',
      position: 'right',
      title: axisTitle(names[1] ?? ''),
      ticks,
      grid: { drawOnChartArea: false },
    };
  }
  return scales;
}

export function buildChart(input: ChartInput): BuiltChart {
  const width = input.width ?? 800;
  const height = input.height ?? 400;
  const theme = THEMES[input.theme ?? 'light'];
  const names = Object.keys(input.series);
  // Two metrics get an axis each; more share the left one (their scales would be unreadable otherwise).
  const ownAxes = names.length <= 2;
  const { datasets, ranges, minStep, maxStep } = seriesDatasets(input, names, ownAxes);
  const firstRange = ranges[0];
  if (input.highlightSteps !== undefined && firstRange !== undefined) {
    datasets.push(highlightDataset(input.highlightSteps, firstRange, minStep, maxStep));
  }
  const scales = chartScales(names, ownAxes, theme);

  const config = {
    type: 'line',
    data: { datasets },
    options: {
      animation: false,
      responsive: false,
      devicePixelRatio: 1,
      normalized: true,
      parsing: false,
      scales,
      plugins: {
        title: {
          display: true,
          text: input.title ?? `${input.runName} — ${names.join(', ')}`,
          color: theme.text,
          font: { size: 15 },
        },
        legend: { display: true, labels: { color: theme.text } },
      },
    },
  } as unknown as ChartConfiguration;

  const quickChart = new QuickChart()
    .setConfig(config)
    .setWidth(width)
    .setHeight(height)
    .setBackgroundColor(theme.background)
    .setDevicePixelRatio(1)
    .setFormat('png')
    .setVersion('4');
  return { config, quickChart, width, height, backgroundColor: theme.background, textColor: theme.text };
}
