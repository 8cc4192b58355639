import { describe, expect, it } from 'vitest';
import { createBandWindow } from '../../src/monitor/detectors/band-window.js';
import { robustBand } from '../../src/monitor/detectors/robust.js';
import { theilSen } from '../../src/monitor/detectors/trend.js';
import { evaluate, type NewLines } from '../../src/monitor/evaluate.js';
import {
  createMonitorState,
  parseMonitorState,
  serialiseMonitorState,
} from '../../src/monitor/monitor-state.js';
import { createPrintedMetricsReader } from '../../src/monitor/printed-metrics.js';
import {
  addPoint,
  chartSeries,
  createRollingState,
  DEFAULT_ROLLING_LIMITS,
  type RollingState,
} from '../../src/monitor/rolling-stats.js';
import type { TickContext } from '../../src/monitor/tick-context.js';
import { DEFAULT_DETECTOR_CONFIG } from '../../src/monitor/types.js';
import { testRunMeta } from '../helpers/run-meta.js';

/*
 * Fast paths of the quiet tick, each checked against the slow path on random series: the spike and
 * grad-norm bands kept up to date point by point within a tick (band-window.ts) instead of sorting the
 * window twice per point, the chart series merged instead of mapped and sorted, the Theil–Sen slopes sorted
 * as a typed array. They must give the very numbers of the slow ones.
 */

/** A small deterministic generator (mulberry32), so a failure names its seed. */
function randomOf(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = Math.imul(state ^ (state >>> 15), 1 | state);
    mixed = (mixed + Math.imul(mixed ^ (mixed >>> 7), 61 | mixed)) ^ mixed;
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4294967296;
  };
}

/** Values with ties, zeros of both signs, non-finite values, spikes and huge magnitudes. */
function randomValue(random: () => number): number {
  const pick = random();
  if (pick < 0.05) return Number.NaN;
  if (pick < 0.07) return random() < 0.5 ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY;
  if (pick < 0.12) return random() < 0.5 ? 0 : -0;
  if (pick < 0.3) return Math.round(random() * 4); // many ties
  if (pick < 0.32) return (random() - 0.5) * 1e308; // overflowing sums and differences
  if (pick < 0.4) return random() * 1000; // spikes
  return 1 + (random() - 0.5) * 0.1;
}

const same = (fast: ReturnType<typeof robustBand>, slow: ReturnType<typeof robustBand>) =>
  Object.is(fast.size, slow.size) &&
  Object.is(fast.center, slow.center) &&
  Object.is(fast.spread, slow.spread);

describe('band window', () => {
  it('gives the same median and MAD as robustBand after every push, on random series', () => {
    let compared = 0;
    for (let seed = 1; seed <= 300; seed++) {
      const random = randomOf(seed);
      const count = [1, 2, 3, 7, 50, 100][seed % 6] as number;
      const values = Array.from({ length: Math.floor(random() * 150) }, () => randomValue(random));
      const window = createBandWindow(values, count);
      for (let point = 0; point < 60; point++) {
        const slow = robustBand(values, count);
        const fast = window.band();
        if (!same(fast, slow))
          throw new Error(`seed ${seed}, point ${point}: ${JSON.stringify({ fast, slow })}`);
        compared++;
        const value = randomValue(random);
        values.push(value);
        window.push(value);
      }
    }
    expect(compared).toBe(300 * 60);
  });

  it('falls back to recomputing for an empty window', () => {
    for (const count of [0]) {
      const values = [1, 5, 2, 8];
      const window = createBandWindow(values, count);
      window.push(3);
      expect(window.band()).toEqual(robustBand([...values, 3], count));
    }
  });
});

describe('bands within a tick', () => {
  const meta = testRunMeta('band', { name: 'band' });
  const context: TickContext = {
    meta,
    detectors: { ...DEFAULT_DETECTOR_CONFIG, spikeWindow: 20, gradNormWindow: 30 },
    limits: DEFAULT_ROLLING_LIMITS,
    printedMetrics: createPrintedMetricsReader({}),
  };
  const newLines = (lines: string[]): NewLines => ({ lines, reset: false, more: false });

  it('raises the same incidents and keeps the same state whether points come one per tick or many', () => {
    for (let seed = 1; seed <= 8; seed++) {
      const random = randomOf(seed);
      const lines = Array.from({ length: 400 }, (_, step) => {
        const loss = random() < 0.03 ? 50 * random() : 2 / Math.sqrt(1 + step) + 0.05 * random();
        const grad = random() < 0.1 ? 20 * random() : 1 + 0.2 * random();
        const gradText = random() < 0.02 ? 'NaN' : String(grad);
        return `{"step": ${step}, "loss": ${loss}, "grad_norm": ${gradText}}`;
      });
      const single = createMonitorState();
      const batched = createMonitorState();
      const singleKinds: string[] = [];
      const batchedKinds: string[] = [];
      lines.forEach((line, index) => {
        const now = index * 1000;
        for (const incident of evaluate(
          single,
          newLines([line]),
          newLines([]),
          { kind: 'alive' },
          now,
          context,
        ).incidents)
          singleKinds.push(`${incident.id}@${incident.at}:${incident.summary}`);
      });
      for (let from = 0; from < lines.length; from += 37) {
        const now = Math.min(from + 36, lines.length - 1) * 1000;
        const chunk = newLines(lines.slice(from, from + 37));
        for (const incident of evaluate(batched, chunk, newLines([]), { kind: 'alive' }, now, context)
          .incidents)
          batchedKinds.push(`${incident.id}:${incident.summary}`);
      }
      // The clocks differ (one tick per point vs per chunk), so compare what does not depend on them.
      // Per tick, grad-norm incidents come after the per-point ones, so the order within a tick differs.
      expect(batchedKinds.sort()).toEqual(singleKinds.map((entry) => entry.replace(/@\d+:/, ':')).sort());
      expect(singleKinds.some((entry) => entry.includes('spike'))).toBe(true);
      // What the bands feed: episodes, windows and the grad-norm series (the clocks differ, so not all).
      const kept = (state: typeof single) => {
        const { rolling, episodes, extras } = JSON.parse(serialiseMonitorState(state));
        return { metrics: rolling.metrics, episodes, grad: extras.grad };
      };
      expect(kept(batched)).toEqual(kept(single));
    }
  });
});

/** chartSeries as it was before its merge fast path (a map of steps, then a sort). */
function chartSeriesByMap(history: Array<[number, number]>, steps: number[], values: number[]) {
  const byStep = new Map<number, number>();
  for (const [step, value] of history) byStep.set(step, value);
  for (let index = 0; index < steps.length; index++)
    byStep.set(steps[index] as number, values[index] as number);
  return [...byStep.entries()].sort((a, b) => a[0] - b[0]).map(([step, value]) => ({ step, value }));
}

describe('chart series', () => {
  it('merges history and window to what the map-and-sort gives, on random series', () => {
    for (let seed = 1; seed <= 500; seed++) {
      const random = randomOf(seed);
      // Mostly increasing steps; some series repeat or go back (a restart), some start at -0.
      const messy = random() < 0.3;
      const nextStep = (step: number) =>
        messy && random() < 0.1 ? step - Math.floor(random() * 5) : step + 1 + Math.floor(random() * 3);
      const history: Array<[number, number]> = [];
      let step = random() < 0.2 ? -0 : Math.floor(random() * 10);
      for (let index = Math.floor(random() * 60); index > 0; index--) {
        history.push([step, randomValue(random)]);
        step = nextStep(step);
      }
      // The window overlaps the history's end (every point of the window may also be sampled there).
      step =
        history.length > 0 && random() < 0.7
          ? (history.at(-Math.ceil(random() * history.length))?.[0] ?? 0)
          : step;
      const steps: number[] = [];
      const values: number[] = [];
      for (let index = Math.floor(random() * 40); index > 0; index--) {
        steps.push(step);
        values.push(randomValue(random));
        step = nextStep(step);
      }
      const state = createRollingState();
      state.metrics.loss = {
        steps,
        values,
        historySteps: history.map(([historyStep]) => historyStep),
        historyValues: history.map(([, value]) => value),
        stride: 1,
        sinceSample: 0,
        count: steps.length,
        nonFinite: 0,
      };
      const fast = chartSeries(state, 'loss');
      const slow = chartSeriesByMap(history, steps, values);
      expect(fast.length, `seed ${seed}`).toBe(slow.length);
      fast.forEach((point, index) => {
        const expected = slow[index];
        if (!(Object.is(point.step, expected?.step) && Object.is(point.value, expected?.value)))
          throw new Error(
            `seed ${seed}, point ${index}: ${point.step}/${point.value} vs ${expected?.step}/${expected?.value}`,
          );
      });
    }
  });
});

/** theilSen as it was before its typed sort (comparator sorts, medians of copies). */
function theilSenSorted(xs: number[], ys: number[], z: number) {
  const medianOf = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    const middle = sorted.length >> 1;
    return sorted.length % 2 === 1
      ? (sorted[middle] as number)
      : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
  };
  const bins = 48;
  const x: number[] = [];
  const y: number[] = [];
  if (xs.length <= bins) {
    x.push(...xs);
    y.push(...ys);
  } else {
    for (let bin = 0; bin < bins; bin++) {
      const from = Math.floor((bin * xs.length) / bins);
      const to = Math.floor(((bin + 1) * xs.length) / bins);
      if (to <= from) continue;
      x.push(medianOf(xs.slice(from, to)));
      y.push(medianOf(ys.slice(from, to)));
    }
  }
  const n = x.length;
  if (n < 6) return undefined;
  const slopes: number[] = [];
  for (let i = 0; i < n; i++)
    for (let j = i + 1; j < n; j++) {
      const dx = (x[j] as number) - (x[i] as number);
      if (dx > 0) slopes.push(((y[j] as number) - (y[i] as number)) / dx);
    }
  if (slopes.length < 3) return undefined;
  slopes.sort((a, b) => a - b);
  const count = slopes.length;
  const spread = z * Math.sqrt((n * (n - 1) * (2 * n + 5)) / 18);
  const lowerIndex = Math.max(0, Math.min(count - 1, Math.floor((count - spread) / 2)));
  const upperIndex = Math.max(0, Math.min(count - 1, Math.ceil((count + spread) / 2)));
  return {
    slope: medianOf(slopes),
    lower: slopes[lowerIndex],
    upper: slopes[upperIndex],
    range: (x.at(-1) as number) - (x[0] as number),
    points: n,
  };
}

describe('Theil–Sen trend', () => {
  it('gives the same slope and bounds as the comparator sort, on random log-log curves', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const random = randomOf(seed);
      const length = 3 + Math.floor(random() * 400);
      const xs: number[] = [];
      const ys: number[] = [];
      let step = Math.floor(random() * 100);
      for (let index = 0; index < length; index++) {
        // What the plateau check passes: log(step + 1) (steps may repeat) and log(loss), ties included.
        step += random() < 0.1 ? 0 : 1 + Math.floor(random() * 20);
        xs.push(Math.log(step + 1));
        ys.push(
          random() < 0.1
            ? 0
            : Math.log(Math.round((2 / Math.sqrt(step + 1) + 0.1 * random()) * 1e3) / 1e3 + 1e-3),
        );
      }
      const z = [1.645, 2.576][seed % 2] as number;
      expect(theilSen(xs, ys, z), `seed ${seed}`).toEqual(theilSenSorted(xs, ys, z));
    }
  });

  it('selects the same order statistics as a sort, with many ties, long series and infinite slopes', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const random = randomOf(seed);
      const length = 6 + Math.floor(random() * 900);
      const xs: number[] = [];
      const ys: number[] = [];
      for (let index = 0; index < length; index++) {
        // Few distinct x and y: equal slopes, equal bin medians.
        xs.push(seed % 3 === 0 ? Math.floor(random() * 8) : Math.log(index + 1));
        ys.push(Math.round(random() * 4));
      }
      // One infinite y gives infinite slopes (two would give NaN ones, which no sort orders alike).
      if (seed % 4 === 0)
        ys[Math.floor(random() * length)] = (random() < 0.5 ? 1 : -1) * Number.POSITIVE_INFINITY;
      xs.sort((a, b) => a - b);
      const z = [1.645, 2.576][seed % 2] as number;
      expect(theilSen(xs, ys, z), `seed ${seed}`).toEqual(theilSenSorted(xs, ys, z));
    }
  });
});

/** A window's values as the `f64:` base64 of their little-endian float64 bytes, written another way. */
function floatText(values: readonly number[]): string {
  const view = new DataView(new ArrayBuffer(values.length * 8));
  for (const [index, value] of values.entries()) view.setFloat64(index * 8, value, true);
  return `f64:${Buffer.from(view.buffer).toString('base64')}`;
}

/**
 * The state's JSON as it was written before the history texts were kept (a copy with non-finite codes);
 * `floats` writes the windows' values as their bytes, as now, instead of as decimal numbers, as before.
 */
function serialisedByCopy(state: ReturnType<typeof createMonitorState>, floats: boolean): string {
  const code = (value: number) =>
    Number.isFinite(value) ? value : Number.isNaN(value) ? 'NaN' : value > 0 ? 'Inf' : '-Inf';
  const rolling: RollingState = state.rolling;
  const metrics: Record<string, unknown> = {};
  for (const [name, series] of Object.entries(rolling.metrics)) {
    const { historySteps, historyValues, ...rest } = series;
    metrics[name] = {
      ...rest,
      values: floats ? floatText(series.values) : series.values.map(code),
      history: historySteps.map((step, index) => [step, code(historyValues[index] as number)]),
    };
  }
  const lastMetrics = Object.fromEntries(
    Object.entries(rolling.lastMetrics).map(([name, value]) => [name, code(value)]),
  );
  return JSON.stringify({ ...state, rolling: { ...rolling, metrics, lastMetrics } });
}

describe('state serialisation', () => {
  it('writes what a fresh stringify writes, tick after tick, through compactions and non-finite values', () => {
    const limits = { ...DEFAULT_ROLLING_LIMITS, windowSize: 40, historyCap: 50 };
    for (let seed = 1; seed <= 40; seed++) {
      const random = randomOf(seed);
      const state = createMonitorState();
      let step = 0;
      for (let tick = 0; tick < 30; tick++) {
        for (let point = Math.floor(random() * 20); point > 0; point--) {
          const metrics: Record<string, number> = { loss: randomValue(random) };
          if (random() < 0.7) metrics['eval/loss'] = randomValue(random);
          addPoint(state.rolling, { step: step++, metrics }, step * 1000, limits);
        }
        const written = serialiseMonitorState(state);
        expect(JSON.parse(written), `seed ${seed}, tick ${tick}`).toEqual(
          JSON.parse(serialisedByCopy(state, true)),
        );
        // And it reads back to the same state (non-finite numbers included), as does a state written before
        // the windows' values were written as bytes.
        expect(serialiseMonitorState(parseMonitorState(written))).toBe(written);
        expect(serialiseMonitorState(parseMonitorState(serialisedByCopy(state, false)))).toBe(written);
        const values = parseMonitorState(written).rolling.metrics.loss?.values ?? [];
        expect(
          values.every((value, index) => Object.is(value, state.rolling.metrics.loss?.values[index])),
        ).toBe(true);
      }
    }
  });
});
