import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { compileMetricPattern, MetricPatternError } from '../../src/config/metric-pattern.js';
import { ConfigError } from '../../src/errors.js';
import {
  appendDerived,
  formatDerivedLine,
  metricsFileOf,
  STDOUT_METRICS_FILE,
} from '../../src/runs/derived-file.js';
import { parseMetricLine } from '../../src/runs/file-tail.js';
import { createStdoutParser, createStdoutParseState } from '../../src/runs/stdout-metrics/stdout-parser.js';

function parseOne(line: string, pattern?: RegExp) {
  const parser = createStdoutParser(pattern === undefined ? {} : { pattern });
  return parser.parseLines([line], createStdoutParseState()).points;
}

describe('printed metric formats', () => {
  it.each([
    [
      "{'loss': 0.4321, 'grad_norm': 1.23, 'learning_rate': 5e-05, 'epoch': 0.42}",
      'python-dict',
      undefined,
      { loss: 0.4321, grad_norm: 1.23, learning_rate: 5e-5, epoch: 0.42 },
    ],
    [
      "{'eval_loss': 0.61, 'eval_accuracy': 0.8, 'eval_runtime': 1.5, 'epoch': 1.0}",
      'python-dict',
      undefined,
      { eval_loss: 0.61, eval_accuracy: 0.8, eval_runtime: 1.5, epoch: 1 },
    ],
    [
      "{'train_runtime': 12.3, 'train_samples_per_second': 4.5, 'train_loss': 0.5, 'epoch': 3.0}",
      'python-dict',
      undefined,
      { train_runtime: 12.3, train_samples_per_second: 4.5, train_loss: 0.5, epoch: 3 },
    ],
    [
      "{'loss': '0.52', 'grad_norm': np.float64(1.5), 'note': 'x'}",
      'python-dict',
      undefined,
      { loss: 0.52, grad_norm: 1.5 },
    ],
    ['{"step": 7, "loss": 0.5, "lr": 3e-4, "tag": "a"}', 'json', 7, { loss: 0.5, lr: 3e-4 }],
    // The helper's printed form (outside Shepherd, or SHEPHERD_METRICS_STDOUT=1 in a Kubernetes pod).
    ['[metrics] {"ts": 1717.5, "step": 8, "loss": 0.25}', 'json', 8, { loss: 0.25 }],
    ['step 10 | loss 0.52 | lr 3e-4', 'key-value', 10, { loss: 0.52, lr: 3e-4 }],
    ['step=10 loss=0.52', 'key-value', 10, { loss: 0.52 }],
    ['[step 10] loss: 0.52', 'key-value', 10, { loss: 0.52 }],
    ['iter 200: loss 2.1, time 35ms', 'key-value', 200, { loss: 2.1, time_ms: 35 }],
    ['Epoch 1 Step 200: loss=0.48', 'key-value', 200, { epoch: 1, loss: 0.48 }],
    [
      'Epoch 0:  45%|████▌     | 45/100 [00:01<00:01, 30.12it/s, loss=0.52, v_num=0]',
      'key-value',
      45,
      { epoch: 0, loss: 0.52 },
    ],
    [
      '100/100 [==============================] - 1s 5ms/step - loss: 0.5200 - accuracy: 0.8100',
      'key-value',
      100,
      { loss: 0.52, accuracy: 0.81 },
    ],
    ['2024-01-01 12:00:00,123 - INFO - step=5 acc=0.3', 'key-value', 5, { acc: 0.3 }],
  ])('%s', (line, format, step, metrics) => {
    const [point, ...rest] = parseOne(line);
    expect(rest).toEqual([]);
    expect(point?.format).toBe(format);
    if (step !== undefined) expect(point?.step).toBe(step);
    expect(point?.metrics).toEqual(metrics);
  });

  it('reads bare nan, inf and -inf as Python prints them', () => {
    const [dict] = parseOne("{'loss': nan, 'grad_norm': inf, 'eval_loss': -inf}");
    expect(dict?.metrics.loss).toBeNaN();
    expect(dict?.metrics.grad_norm).toBe(Number.POSITIVE_INFINITY);
    expect(dict?.metrics.eval_loss).toBe(Number.NEGATIVE_INFINITY);
    expect(parseOne('step 3 | loss nan')[0]?.metrics.loss).toBeNaN();
    expect(parseOne('{"step": 3, "loss": NaN}')[0]?.metrics.loss).toBeNaN();
  });

  it('leaves free text alone', () => {
    for (const line of [
      'Downloading 3 files',
      'Saving checkpoint at step 200',
      'Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 32768.0',
      '  5%|▌         | 50/1000 [00:05<01:30, 10.5it/s]',
      "{'model': 'gpt2', 'dataset': 'wikitext'}",
      'Traceback (most recent call last):',
    ]) {
      expect(parseOne(line), line).toEqual([]);
    }
  });

  describe('coloured and decorated output', () => {
    const green = (text: string) => `\x1b[32m${text}\x1b[0m`;
    const bold = (text: string) => `\x1b[1m${text}\x1b[22m`;

    it('reads a coloured step and loss (the step is not a running count)', () => {
      const [point, ...rest] = parseOne(`${bold('step')} 10 | ${green('loss')} ${green('0.5')}`);
      expect(rest).toEqual([]);
      expect(point?.step).toBe(10);
      expect(point?.metrics).toEqual({ loss: 0.5 });
      expect(parseOne(`\x1b[1;36mstep=20\x1b[0m loss=\x1b[31m0.25\x1b[0m`)[0]).toMatchObject({
        step: 20,
        metrics: { loss: 0.25 },
      });
    });

    it('reads a coloured Trainer dict', () => {
      const line = green("{'loss': 0.4321, 'grad_norm': 1.23, 'learning_rate': 5e-05, 'epoch': 0.42}");
      const [point] = parseOne(line);
      expect(point?.format).toBe('python-dict');
      expect(point?.metrics).toEqual({ loss: 0.4321, grad_norm: 1.23, learning_rate: 5e-5, epoch: 0.42 });
    });

    it('follows a Rich progress bar redrawn with \\r and erase-line codes, then its metric line', () => {
      const parser = createStdoutParser();
      const state = createStdoutParseState();
      // Rich's live display: `\r\x1b[2K` before each redraw, the bar and columns coloured.
      const rich = (n: number) =>
        `\r\x1b[2K\x1b[35mTraining\x1b[0m \x1b[38;2;249;38;114m━━━━━━\x1b[0m\x1b[38;5;237m━━━━\x1b[0m ` +
        `\x1b[32m${n}/200\x1b[0m [\x1b[33m0:00:01\x1b[0m]`;
      const chunk = `${rich(30)}${rich(31)}\r\x1b[2K${green("{'loss': 0.75}")}`;
      const { points } = parser.parseLines([chunk], state);
      expect(points.map((point) => [point.step, point.metrics])).toEqual([[31, { loss: 0.75 }]]);
      expect(state.plannedSteps).toBe(200);
      // The bar alone moving on is progress, colours and all.
      expect(parser.parseLines([`${rich(40)}${rich(41)}`], state).progressStep).toBe(41);
    });
  });

  it('takes the step from the line, else the tqdm bar, else a running count', () => {
    const parser = createStdoutParser();
    const state = createStdoutParseState();
    // Running count when nothing names a step.
    expect(parser.parseLines(["{'loss': 1.0}", "{'loss': 0.9}"], state).points.map((p) => p.step)).toEqual([
      0, 1,
    ]);
    // The bar, redrawn with \r on one physical line, then a dict written between updates.
    const bar = (n: number, total: number) =>
      `${Math.round((100 * n) / total)}%|##| ${n}/${total} [00:01<00:09, 9.8it/s]`;
    const chunk = `${bar(10, 1000)}\r${bar(11, 1000)}\r{'loss': 0.8}`;
    expect(parser.parseLines([chunk], state).points.map((p) => p.step)).toEqual([11]);
    expect(state.plannedSteps).toBe(1000);
    // An evaluation bar (smaller total) does not move the training step.
    expect(parser.parseLines([`${bar(3, 13)}\r{'eval_loss': 0.7}`], state).points[0]?.step).toBe(11);
    // The bar moving on without a metric line is progress.
    expect(parser.parseLines([`${bar(12, 1000)}\r${bar(15, 1000)}`], state)).toEqual({
      points: [],
      progressStep: 15,
    });
    // A line that names its step wins over the bar.
    expect(parser.parseLines(['step=500 loss=0.3'], state).points[0]?.step).toBe(500);
  });

  it('takes the training bar, not the dataset and loading bars that ran before it', () => {
    const parser = createStdoutParser();
    const state = createStdoutParseState();
    const map = 'Map: 100%|##########| 7473/7473 [00:01<00:00, 5120.33 examples/s]';
    const shards = 'Loading checkpoint shards: 100%|##########| 2/2 [00:03<00:00,  1.52s/it]';
    // Finished bars alone are no progress.
    expect(parser.parseLines([map, shards], state)).toEqual({ points: [] });
    const train = (n: number) => `  1%|          | ${n}/500 [00:01<04:10,  2.00it/s]`;
    expect(parser.parseLines([`${train(4)}\r${train(5)}\r{'loss': 1.5}`], state).points[0]?.step).toBe(5);
    expect(state.plannedSteps).toBe(500);
    // Once a metric line used it, an evaluation bar over more batches does not take over.
    expect(
      parser.parseLines([`${train(6)}\r Eval: 10%| | 100/1000 [00:01<00:09]\r{'eval_loss': 1.4}`], state)
        .points[0]?.step,
    ).toBe(6);
  });

  it('starts with a fresh bar after a relaunch, so a resumed run keeps its real step', () => {
    const parser = createStdoutParser();
    const state = createStdoutParseState();
    const bar = (n: number) => `| ${n}/100 [00:01<00:09, 9.8it/s]`;
    expect(parser.parseLines([`${bar(25)}\r{'loss': 1.0}`], state).points[0]?.step).toBe(25);
    const header = '=== launch 2 at 2026-12-01T06:00:00Z (script v2, gpus none) ===';
    const resumed = parser.parseLines([header, `${bar(21)}\r{'loss': 0.9}`], state).points;
    expect(resumed[0]?.step).toBe(21);
  });

  it('keeps the step increasing when a per-epoch bar restarts (Lightning, Keras)', () => {
    const parser = createStdoutParser();
    const state = createStdoutParseState();
    const line = (n: number) => `Epoch 0: | ${n}/50 [00:01<00:01, 30it/s, loss=0.5, v_num=1]`;
    const steps = parser.parseLines([line(49), line(50), line(1), line(2)], state).points.map((p) => p.step);
    expect(steps).toEqual([49, 50, 51, 52]);
  });

  it('SHEPHERD_METRIC_PATTERN reads what no built-in format does, and is tried first', () => {
    const pattern = compileMetricPattern('^TRAIN it=(?<step>\\d+) L=(?<loss>\\S+) acc=(?<accuracy>\\S+)');
    const [point] = parseOne('TRAIN it=12 L=nan acc=0.75', pattern);
    expect(point?.format).toBe('pattern');
    expect(point?.step).toBe(12);
    expect(point?.metrics.loss).toBeNaN();
    expect(point?.metrics.accuracy).toBe(0.75);
    expect(parseOne('TRAIN it=12 L=nan acc=0.75')).toEqual([]);
    const first = parseOne(
      'step=3 loss=0.5',
      compileMetricPattern('step=(?<step>\\d+) loss=(?<train_loss>\\S+)'),
    );
    expect(first).toEqual([{ step: 3, metrics: { train_loss: 0.5 }, format: 'pattern' }]);
    expect(() => compileMetricPattern('loss (\\d+')).toThrow(MetricPatternError);
    expect(() => compileMetricPattern('loss (\\d+)')).toThrow(/named group/);
    expect(() => loadConfig({ SHEPHERD_METRIC_PATTERN: 'loss (?<loss>' })).toThrow(ConfigError);
    expect(() => loadConfig({ SHEPHERD_METRIC_PATTERN: 'loss (?<loss>' })).toThrow(/SHEPHERD_METRIC_PATTERN/);
    expect(loadConfig({ SHEPHERD_METRIC_PATTERN: 'L=(?<loss>\\S+)' }).monitor.metricPattern).toBe(
      'L=(?<loss>\\S+)',
    );
  });
});

describe('stdout-metrics.jsonl', () => {
  let directory: string;
  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'shepherd-derived-'));
  });
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('is written in the metrics.jsonl format, and a retried append never duplicates a point', async () => {
    const first = formatDerivedLine(2, { loss: 0.5, grad_norm: Number.POSITIVE_INFINITY });
    expect(parseMetricLine(first.trim())).toEqual({
      step: 2,
      values: { loss: 0.5, grad_norm: Number.POSITIVE_INFINITY },
    });
    const committed = await appendDerived(directory, 0, first);
    const second = formatDerivedLine(4, { loss: Number.NaN });
    // A tick wrote its line, then failed before committing: the retry starts again from `committed`.
    await appendDerived(directory, committed, second);
    await appendDerived(directory, committed, second);
    const lines = (await readFile(join(directory, STDOUT_METRICS_FILE), 'utf8')).trim().split('\n');
    expect(lines).toEqual([first.trim(), second.trim()]);
    expect(lines[1]).toContain('"source": "stdout"');
  });

  it('is what readers use only while the helper wrote nothing', async () => {
    expect(await metricsFileOf(directory)).toEqual({
      path: join(directory, STDOUT_METRICS_FILE),
      source: 'stdout',
    });
    await writeFile(join(directory, 'metrics.jsonl'), '{"step": 1, "loss": 1}\n');
    expect(await metricsFileOf(directory)).toEqual({
      path: join(directory, 'metrics.jsonl'),
      source: 'helper',
    });
  });
});
