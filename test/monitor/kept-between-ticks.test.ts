import { describe, expect, it } from 'vitest';
import { keptBandWindow } from '../../src/monitor/detectors/band-window.js';
import { median, robustBand } from '../../src/monitor/detectors/robust.js';
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
} from '../../src/monitor/rolling-stats.js';
import type { TickContext } from '../../src/monitor/tick-context.js';
import { DEFAULT_DETECTOR_CONFIG } from '../../src/monitor/types.js';
import { parseMetricLine } from '../../src/runs/metric-line.js';
import { testRunMeta } from '../helpers/run-meta.js';

/*
 * What the woken evaluation keeps or skips between evaluations must give the very results of doing it
 * afresh: band windows kept from the last tick, the plateau's chart series built from the window's first
 * step only, the plateau reference's median without copies, metric lines parsed without the reviver.
 */

function randomOf(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = Math.imul(state ^ (state >>> 15), 1 | state);
    mixed = (mixed + Math.imul(mixed ^ (mixed >>> 7), 61 | mixed)) ^ mixed;
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4294967296;
  };
}

const newLines = (lines: string[]): NewLines => ({ lines, reset: false, more: false });

describe('kept between ticks', () => {
  const context: TickContext = {
    meta: testRunMeta('kept', { name: 'kept' }),
    detectors: { ...DEFAULT_DETECTOR_CONFIG, spikeWindow: 20, gradNormWindow: 30 },
    limits: DEFAULT_ROLLING_LIMITS,
    printedMetrics: createPrintedMetricsReader({}),
    woken: true,
  };

  it('one point per woken evaluation: the same incidents and state as a state read afresh each time', () => {
    for (let seed = 1; seed <= 6; seed++) {
      const random = randomOf(seed);
      let kept = createMonitorState();
      let afresh = createMonitorState();
      const keptSaid: string[] = [];
      const afreshSaid: string[] = [];
      for (let step = 0; step < 300; step++) {
        const loss = random() < 0.04 ? 40 * random() : 2 / Math.sqrt(1 + step) + 0.05 * random();
        const grad = random() < 0.1 ? 25 * random() : 1 + 0.2 * random();
        const line = `{"step": ${step}, "loss": ${random() < 0.02 ? 'NaN' : loss}, "grad_norm": ${grad}}`;
        const now = step * 1000;
        // Read again from its text: new arrays, so every window is rebuilt from scratch.
        afresh = parseMonitorState(serialiseMonitorState(afresh));
        for (const incident of evaluate(kept, newLines([line]), newLines([]), { kind: 'alive' }, now, context)
          .incidents)
          keptSaid.push(`${incident.id}:${incident.summary}`);
        for (const incident of evaluate(
          afresh,
          newLines([line]),
          newLines([]),
          { kind: 'alive' },
          now,
          context,
        ).incidents)
          afreshSaid.push(`${incident.id}:${incident.summary}`);
        // Now and then the kept state is replaced too (a tick after another worker's commit).
        if (step % 97 === 96) kept = parseMonitorState(serialiseMonitorState(kept));
      }
      expect(keptSaid, `seed ${seed}`).toEqual(afreshSaid);
      expect(keptSaid.some((said) => said.includes(':spike:') || said.includes(':grad_norm:'))).toBe(true);
      expect(serialiseMonitorState(kept)).toBe(serialiseMonitorState(afresh));
    }
  });

  it('a kept band window is rebuilt when its array changed behind it', () => {
    const values = [1, 2, 3, 4, 5];
    const window = keptBandWindow(values, 4);
    expect(keptBandWindow(values, 4)).toBe(window);
    values.push(100);
    // Pushed to the array but not to the window: it no longer mirrors the array.
    const rebuilt = keptBandWindow(values, 4);
    expect(rebuilt).not.toBe(window);
    expect(rebuilt.band()).toEqual(robustBand(values, 4));
    // Another count is another window.
    expect(keptBandWindow(values, 3).band()).toEqual(robustBand(values, 3));
  });
});

describe('chart series from a step', () => {
  it('is the chart series without the points before that step, merged or sorted', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const random = randomOf(seed);
      const rolling = createRollingState();
      const limits = { ...DEFAULT_ROLLING_LIMITS, windowSize: 50, historyCap: 40 };
      let step = 0;
      for (let point = 0; point < 400; point++) {
        // Steps mostly rise; some seeds restart them (the map-and-sort path).
        step = seed % 4 === 0 && random() < 0.02 ? 0 : step + 1 + Math.floor(random() * 3);
        addPoint(rolling, { step, metrics: { loss: random() } }, point * 1000, limits);
      }
      for (const fromStep of [Number.NEGATIVE_INFINITY, -5, 0, 1, step / 2, step - 10, step, step + 1]) {
        const expected = chartSeries(rolling, 'loss').filter((point) => !(point.step < fromStep));
        expect(chartSeries(rolling, 'loss', fromStep), `seed ${seed} from ${fromStep}`).toEqual(expected);
      }
    }
  });
});

describe('plateau reference', () => {
  it('is the median of the last five finite values, -0 and non-finite ones included', () => {
    const random = randomOf(7);
    const rolling = createRollingState();
    const values: number[] = [];
    let best: number | undefined;
    for (let step = 0; step < 2000; step++) {
      const pick = random();
      const value =
        pick < 0.05 ? Number.NaN : pick < 0.1 ? -0 : pick < 0.15 ? 0 : pick < 0.2 ? Infinity : 5 - step / 500;
      addPoint(rolling, { step, metrics: { loss: value } }, step, {
        ...DEFAULT_ROLLING_LIMITS,
        windowSize: 8,
      });
      values.push(Number(value.toPrecision(7)));
      const recent = values.slice(-5).filter(Number.isFinite);
      if (recent.length === 0) continue;
      const smoothed = median(recent);
      if (best === undefined || smoothed < best - Math.abs(best) * 0.01) best = smoothed;
      expect(Object.is(rolling.metrics.loss?.best, best), `step ${step}`).toBe(true);
    }
  });
});

describe('metric lines', () => {
  it('parse the same without the reviver as with it', () => {
    const lines = [
      '{"step": 1, "loss": 0.5}',
      '{"step": 2, "loss": 0.5, "metrics": {"acc": 0.9, "step": 7, "ts": 3}}',
      '{"_step": 3, "time": "2024-01-01T00:00:00Z", "loss": -0.0, "lr": 1e-300, "big": 1e308}',
      '{"global_step": 4.5, "note": "fine", "flag": true, "none": null, "list": [1, 2]}',
      '{"__proto__": 5, "constructor": 6, "toString": 7, "loss": 1}',
      '{"1": 1, "0": 2, "b": 3, "a": 4}',
      `{${Array.from({ length: 80 }, (_, index) => `"m${index}": ${index}`).join(', ')}}`,
      '{"metrics": {"step": 1}, "iteration": 9}',
      '{"text": "only words"}',
      '[1, 2]',
      '{"loss": 1,}',
    ];
    for (const line of lines) {
      const fast = parseMetricLine(line);
      // A string holding "NaN" sends the line down the rewriting path; as a string, it is no metric.
      const withWord = line.startsWith('{"') ? `{"zz_note": "NaN", ${line.slice(1)}` : line;
      const slow = parseMetricLine(withWord);
      if (fast.ok && slow.ok) expect(slow.point, line).toEqual(fast.point);
      else expect(slow.ok, line).toBe(fast.ok);
    }
    expect(parseMetricLine('{"step": 1, "loss": NaN, "x": -Infinity}')).toEqual({
      ok: true,
      point: { step: 1, metrics: { loss: Number.NaN, x: Number.NEGATIVE_INFINITY } },
    });
  });
});
