import { appendFileSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type MlflowCursors,
  mlflowStoreOf,
  parseMlflowMetricLines,
  readMlflowPoints,
} from '../../src/runs/tfevents/mlflow-store.js';

/* MLflow's file store: `mlruns/<experiment>/<run>/metrics/<name>`, lines `timestamp value step`. */

describe('MLflow metric lines', () => {
  it('reads complete lines, Python spellings of NaN and infinities, and lines without a step', () => {
    const text = '1700000000000 0.5 1\n1700000000001 nan 2\n1700000000002 inf 3\n1700000000003 -inf 4\n';
    const { values, consumed } = parseMlflowMetricLines(Buffer.from(`${text}1700000000004 2.5\n`));
    expect(values.map((value) => value.step)).toEqual([1, 2, 3, 4, 0]);
    expect(values[0]?.value).toBe(0.5);
    expect(values[1]?.value).toBeNaN();
    expect(values[2]?.value).toBe(Number.POSITIVE_INFINITY);
    expect(values[3]?.value).toBe(Number.NEGATIVE_INFINITY);
    expect(values[4]?.value).toBe(2.5);
    expect(consumed).toBe(Buffer.byteLength(text) + '1700000000004 2.5\n'.length);
  });

  it('leaves a torn last line for the next read and skips lines that are not numbers', () => {
    const chunk = Buffer.from('1 0.25 10\nnot a metric line\n1 x 11\n2 0.75 1');
    const { values, consumed } = parseMlflowMetricLines(chunk);
    expect(values).toEqual([{ step: 10, value: 0.25 }]);
    expect(consumed).toBe('1 0.25 10\nnot a metric line\n1 x 11\n'.length);
    expect(parseMlflowMetricLines(Buffer.from('1 0.5 1'))).toEqual({ values: [], consumed: 0 });
  });

  it('takes a file: tracking URI or a bare path as a store, not a server', () => {
    expect(mlflowStoreOf('file:///data/mlruns', '/work')).toBe('/data/mlruns');
    expect(mlflowStoreOf('file:/data/mlruns', '/work')).toBe('/data/mlruns');
    expect(mlflowStoreOf('file:./store', '/work')).toBe('/work/store');
    expect(mlflowStoreOf('store', '/work')).toBe('/work/store');
    expect(mlflowStoreOf('http://127.0.0.1:5000', '/work')).toBeUndefined();
    expect(mlflowStoreOf('sqlite:///mlflow.db', '/work')).toBeUndefined();
    expect(mlflowStoreOf(undefined, '/work')).toBeUndefined();
  });
});

describe('reading an MLflow file store', () => {
  let store: string;
  beforeEach(() => {
    store = mkdtempSync(join(tmpdir(), 'shepherd-mlruns-'));
  });
  afterEach(() => rmSync(store, { recursive: true, force: true }));

  function mlflowRun(runId: string): string {
    const runPath = join(store, '0', runId);
    mkdirSync(join(runPath, 'metrics', 'train'), { recursive: true });
    writeFileSync(join(runPath, 'meta.yaml'), `run_id: ${runId}\nexperiment_id: '0'\n`);
    return runPath;
  }

  it('reads new lines each time from its cursors, nested names included, and a torn line once complete', async () => {
    const launchedAt = Date.now();
    const runPath = mlflowRun('abc');
    writeFileSync(join(store, '0', 'meta.yaml'), 'name: Default\n');
    const loss = join(runPath, 'metrics', 'train', 'loss');
    const accuracy = join(runPath, 'metrics', 'accuracy');
    writeFileSync(loss, '1 2.0 1\n2 1.5 2\n3 1.2');
    writeFileSync(accuracy, '1 0.1 1\n');
    const cursors: MlflowCursors = {};
    const first = await readMlflowPoints([store], cursors, launchedAt, 1 << 20);
    expect(first.points).toEqual([
      { step: 1, metrics: { 'train/loss': 2, accuracy: 0.1 } },
      { step: 2, metrics: { 'train/loss': 1.5 } },
    ]);
    appendFileSync(loss, ' 3\n4 nan 4\n');
    const second = await readMlflowPoints([store], cursors, launchedAt, 1 << 20);
    expect(second.points.map((point) => point.step)).toEqual([3, 4]);
    expect(second.points[0]?.metrics['train/loss']).toBe(1.2);
    expect(second.points[1]?.metrics['train/loss']).toBeNaN();
    expect((await readMlflowPoints([store], cursors, launchedAt, 1 << 20)).points).toEqual([]);
  });

  it('leaves out an MLflow run older than the launch (2 s slack), in the same shared store', async () => {
    const launchedAt = Date.now();
    const old = mlflowRun('old');
    writeFileSync(join(old, 'metrics', 'loss'), '1 9.0 1\n');
    const before = (launchedAt - 60_000) / 1000;
    utimesSync(join(old, 'meta.yaml'), before, before);
    const fresh = mlflowRun('fresh');
    writeFileSync(join(fresh, 'metrics', 'loss'), '1 0.5 1\n');
    const slightly = (launchedAt - 1000) / 1000;
    utimesSync(join(fresh, 'meta.yaml'), slightly, slightly);
    const read = await readMlflowPoints([store], {}, launchedAt, 1 << 20);
    expect(read.points).toEqual([{ step: 1, metrics: { loss: 0.5 } }]);
  });

  it('reads at most the cap per file and says more waits', async () => {
    const runPath = mlflowRun('big');
    const lines = Array.from({ length: 100 }, (_, step) => `1700000000000 ${step / 100} ${step}\n`).join('');
    writeFileSync(join(runPath, 'metrics', 'loss'), lines);
    const cursors: MlflowCursors = {};
    const first = await readMlflowPoints([store], cursors, 0, 1000);
    expect(first.more).toBe(true);
    let steps = first.points.length;
    for (let read = 0; read < 10 && steps < 100; read++)
      steps += (await readMlflowPoints([store], cursors, 0, 1000)).points.length;
    expect(steps).toBe(100);
  });
});
