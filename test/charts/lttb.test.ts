import { describe, expect, it } from 'vitest';
import { downsampleSeries, lttb } from '../../src/charts/lttb.js';

function series(count: number) {
  return Array.from({ length: count }, (_, step) => ({ step, value: 2 + Math.sin(step / 50) * 0.1 }));
}

describe('lttb', () => {
  it('reduces to the threshold, keeps first and last', () => {
    const input = series(100_000);
    const output = lttb(input, 500);
    expect(output).toHaveLength(500);
    expect(output[0]).toBe(input[0]);
    expect(output.at(-1)).toBe(input.at(-1));
    expect(lttb(series(10), 500)).toHaveLength(10);
  });

  it('keeps the maximum of a one-point spike', () => {
    const input = series(100_000);
    input[54_321] = { step: 54_321, value: 90 };
    const output = lttb(input, 500);
    expect(Math.max(...output.map((point) => point.value))).toBe(90);
    expect(output.some((point) => point.step === 54_321)).toBe(true);
  });

  it('splits NaN/Inf points off as markers so they stay visible', () => {
    const input = series(10_000);
    input[100] = { step: 100, value: Number.NaN };
    input[200] = { step: 200, value: Number.POSITIVE_INFINITY };
    const { line, markers } = downsampleSeries(input, 500);
    expect(line.length).toBeLessThanOrEqual(500);
    expect(line.every((point) => Number.isFinite(point.value))).toBe(true);
    expect(markers.map((point) => point.step)).toEqual([100, 200]);
  });
});
