import {
  Chart,
  type ChartDataset,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  ScatterController,
  Tooltip,
} from 'chart.js';
import { userName } from './chat.js';
import { api, byId, formatTime, make } from './dom.js';
import { finite } from './runs-panel.js';
import type { MetricsResponse, RunRow } from './types.js';

/** A run's page (`#run/<id>`): chart of its metrics, live log tail, checkpoints, thread link, controls. */

Chart.register(LineController, ScatterController, LineElement, PointElement, LinearScale, Legend, Tooltip);

const COLOURS = ['#2f6fdb', '#d9822b', '#2e7d4f', '#8e44ad', '#c0392b', '#16a085', '#7f8c8d'];

interface RunView {
  id: string;
  chart?: Chart;
  selected: Set<string>;
  note?: { kind: 'ok' | 'error'; text: string };
  seq: number;
  /** The step range the person zoomed to (drag across the chart); kept across live refreshes. */
  zoom?: { min: number; max: number };
}

/** A drag shorter than this many pixels is a click, not a zoom. */
const ZOOM_MIN_DRAG_PX = 6;

/** Drag across the chart to zoom to those steps; double-click or "reset zoom" shows them all again. */
function enableZoom(
  canvas: HTMLCanvasElement,
  chart: Chart,
  current: RunView,
  reset: HTMLButtonElement,
): void {
  const show = () => {
    const scale = chart.options.scales?.x;
    if (scale !== undefined) {
      scale.min = current.zoom?.min;
      scale.max = current.zoom?.max;
    }
    chart.update('none');
    if (current.zoom === undefined) delete canvas.dataset.zoom;
    else canvas.dataset.zoom = `${Math.round(current.zoom.min)}..${Math.round(current.zoom.max)}`;
    reset.hidden = current.zoom === undefined;
  };
  let startX: number | undefined;
  canvas.addEventListener('mousedown', (event) => {
    startX = event.offsetX;
  });
  canvas.addEventListener('mouseup', (event) => {
    const from = startX;
    startX = undefined;
    if (from === undefined || Math.abs(event.offsetX - from) < ZOOM_MIN_DRAG_PX) return;
    const x = chart.scales.x;
    if (x === undefined) return;
    const a = x.getValueForPixel(Math.min(from, event.offsetX));
    const b = x.getValueForPixel(Math.max(from, event.offsetX));
    if (a === undefined || b === undefined || !(b > a)) return;
    current.zoom = { min: a, max: b };
    show();
  });
  const clear = () => {
    delete current.zoom;
    show();
  };
  canvas.addEventListener('dblclick', clear);
  reset.addEventListener('click', clear);
  show();
}

let view: RunView | undefined;

export function currentRunId(): string | undefined {
  return view?.id;
}

export function closeRun(): void {
  view?.chart?.destroy();
  view = undefined;
}

export function openRun(runId: string): void {
  if (view?.id !== runId) {
    closeRun();
    view = { id: runId, selected: new Set(), seq: 0 };
    byId('run-view').replaceChildren(make('p', 'hint', 'loading…'));
  }
  void refreshRun();
}

function section(title: string): HTMLElement {
  const box = make('section', 'run-section');
  box.append(make('h3', null, title));
  return box;
}

async function act(runId: string, action: 'pause' | 'resume' | 'stop'): Promise<void> {
  const result = await api('POST', `/api/runs/${encodeURIComponent(runId)}/actions`, {
    action,
    user: userName(),
  });
  if (view?.id !== runId) return;
  view.note = result.ok
    ? { kind: 'ok', text: result.data.message || 'Done.' }
    : { kind: 'error', text: result.data.error || `failed (${result.status})` };
  await refreshRun();
}

function renderHeader(run: RunRow): HTMLElement {
  const head = make('div', 'run-head');
  const title = make('h2', null, run.name);
  title.append(make('span', `run-status status-${run.status}`, run.status));
  head.append(title);
  const facts = make('dl', 'run-facts');
  const gpus = run.gpus === 0 ? 'CPU' : `${run.gpus} (${run.gpuIndices.join(',') || 'none held'})`;
  const add = (label: string, value: string | Node) => {
    const dd = make('dd');
    dd.append(value);
    facts.append(make('dt', null, label), dd);
  };
  add('GPUs', gpus);
  add('Step', run.step === undefined ? '—' : String(run.step));
  add('Requested by', run.requester);
  if (run.statusReason) add('Why', run.statusReason);
  for (const tracker of run.trackers ?? []) {
    if (!/^https?:\/\//.test(tracker.value)) {
      add(tracker.label, make('code', null, tracker.value));
      continue;
    }
    const link = make('a', 'tracker-link', tracker.value);
    link.href = tracker.value;
    link.target = '_blank';
    link.rel = 'noopener noreferrer';
    link.dataset.testid = 'run-tracker-link';
    add(tracker.label, link);
  }
  if (run.thread.href !== undefined) {
    const link = make('a', 'thread-jump', 'open the thread');
    link.href = run.thread.href;
    link.dataset.testid = 'run-thread-link';
    add('Thread', link);
  } else {
    add('Thread', run.thread.threadId);
  }
  head.append(facts);
  const actions = make('div', 'actions');
  const buttons: Array<['pause' | 'resume' | 'stop', string, string]> = [
    ['pause', 'Pause', 'default'],
    ['resume', 'Resume', 'primary'],
    ['stop', 'Stop', 'danger'],
  ];
  // Only what applies to the run as it is: Pause on a running run, Resume on a paused or failed one.
  const applicable = new Set(run.actions ?? []);
  for (const [action, label, style] of buttons) {
    if (!applicable.has(action)) continue;
    const button = make('button', `action ${style}`, label);
    button.type = 'button';
    button.dataset.runAction = action;
    button.addEventListener('click', () => {
      for (const other of actions.querySelectorAll('button')) other.disabled = true;
      void act(run.id, action);
    });
    actions.append(button);
  }
  head.append(actions);
  if (view?.note) head.append(make('div', `card-note ${view.note.kind}`, view.note.text));
  return head;
}

function datasets(metrics: MetricsResponse, selected: Set<string>): { sets: ChartDataset[]; nan: string[] } {
  const sets: ChartDataset[] = [];
  const nan: string[] = [];
  [...selected].sort().forEach((name, index) => {
    const colour = COLOURS[index % COLOURS.length] ?? '#2f6fdb';
    const line: { x: number; y: number | null }[] = [];
    const bad: { x: number; y: number }[] = [];
    let lastFinite = 0;
    metrics.points.forEach((point, position) => {
      const value = point.values[name];
      if (value === undefined) return;
      const x = point.step ?? position;
      if (finite(value)) {
        lastFinite = value;
        line.push({ x, y: value });
      } else {
        // A gap in the line and a red cross where the value went bad.
        line.push({ x, y: null });
        bad.push({ x, y: lastFinite });
        nan.push(`${name} ${value} at step ${x}`);
      }
    });
    sets.push({
      type: 'line',
      label: name,
      data: line,
      borderColor: colour,
      backgroundColor: colour,
      pointRadius: 0,
      borderWidth: 1.5,
      spanGaps: false,
    });
    if (bad.length > 0) {
      sets.push({
        type: 'scatter',
        label: `${name} NaN/Inf`,
        data: bad,
        borderColor: '#c93c3c',
        backgroundColor: '#c93c3c',
        pointStyle: 'crossRot',
        pointRadius: 7,
        borderWidth: 2,
      });
    }
  });
  return { sets, nan };
}

function renderChart(box: HTMLElement, metrics: MetricsResponse): void {
  if (!view) return;
  const current = view;
  if (current.selected.size === 0) {
    const first = metrics.names.find((name) => /loss/i.test(name)) ?? metrics.names[0];
    if (first !== undefined) current.selected.add(first);
  }
  const pickers = make('div', 'metric-pickers');
  for (const name of metrics.names) {
    const label = make('label', 'metric-pick');
    const box = make('input');
    box.type = 'checkbox';
    box.checked = current.selected.has(name);
    box.dataset.metric = name;
    box.addEventListener('change', () => {
      if (box.checked) current.selected.add(name);
      else current.selected.delete(name);
      void refreshRun();
    });
    label.append(box, ` ${name}`);
    pickers.append(label);
  }
  box.append(pickers);
  if (metrics.points.length === 0) {
    box.append(make('p', 'empty', 'no metrics yet'));
    return;
  }
  const holder = make('div', 'chart-holder');
  const canvas = make('canvas');
  canvas.dataset.testid = 'run-chart';
  canvas.title = 'drag across the chart to zoom to those steps; double-click to reset';
  holder.append(canvas);
  const reset = make('button', 'zoom-reset', 'reset zoom');
  reset.type = 'button';
  reset.dataset.testid = 'zoom-reset';
  box.append(holder, reset);
  const { sets, nan } = datasets(metrics, current.selected);
  current.chart?.destroy();
  current.chart = new Chart(canvas, {
    type: 'line',
    data: { datasets: sets },
    options: {
      animation: false,
      maintainAspectRatio: false,
      parsing: false,
      normalized: true,
      interaction: { mode: 'nearest', intersect: false },
      scales: { x: { type: 'linear', title: { display: true, text: 'step' } }, y: { type: 'linear' } },
      plugins: { legend: { display: true } },
    },
  });
  enableZoom(canvas, current.chart, current, reset);
  // What was drawn, for people reading the page source and for tests.
  canvas.dataset.metrics = [...current.selected].sort().join(',');
  canvas.dataset.points = String(sets.reduce((total, set) => total + set.data.length, 0));
  if (nan.length > 0) {
    const note = make(
      'p',
      'nan-note',
      `Non-finite values: ${nan.slice(0, 5).join('; ')}${nan.length > 5 ? ' …' : ''}`,
    );
    note.dataset.testid = 'nan-note';
    box.append(note);
  }
}

export async function refreshRun(): Promise<void> {
  if (!view) return;
  const current = view;
  const seq = ++current.seq;
  const base = `/api/runs/${encodeURIComponent(current.id)}`;
  const [run, metrics, log] = await Promise.all([
    api<{ run: RunRow }>('GET', base),
    api<MetricsResponse>('GET', `${base}/metrics`),
    api<{ lines: string[] }>('GET', `${base}/log?lines=200`),
  ]);
  if (view !== current || seq !== current.seq) return;
  const root = byId('run-view');
  if (!run.ok || run.data.run === undefined) {
    root.replaceChildren(make('p', 'hint error', run.data.error || 'could not load the run'));
    return;
  }
  const row = run.data.run;
  const chartBox = section('Metrics');
  chartBox.dataset.testid = 'run-metrics';
  if (metrics.ok) renderChart(chartBox, metrics.data as MetricsResponse);
  const logBox = section('Log');
  const pre = make('pre', 'code run-log', (log.data.lines ?? []).join('\n') || '(no output yet)');
  pre.dataset.testid = 'run-log';
  logBox.append(pre);
  const checkpointBox = section('Checkpoints');
  const checkpoints = row.checkpoints ?? [];
  if (checkpoints.length === 0) checkpointBox.append(make('p', 'empty', 'no checkpoints yet'));
  const list = make('ul', 'checkpoints');
  for (const entry of checkpoints.slice().reverse()) {
    const when = entry.ts === undefined ? '' : ` · ${formatTime(entry.ts * 1000)}`;
    list.append(
      make('li', null, `step ${entry.step}${entry.checkpoint ? ` · ${entry.checkpoint}` : ''}${when}`),
    );
  }
  checkpointBox.append(list);
  const back = make('a', 'back', '← chat');
  back.href = '#';
  root.replaceChildren(back, renderHeader(row), chartBox, logBox, checkpointBox);
  pre.scrollTop = pre.scrollHeight;
}
