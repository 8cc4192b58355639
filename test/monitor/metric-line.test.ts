import { describe, expect, it } from 'vitest';
import { parseMetricLine, recordMalformed } from '../../src/runs/metric-line.js';

describe('parseMetricLine', () => {
  it('parses the line shepherd.py writes, with ts in seconds', () => {
    const result = parseMetricLine('{"ts": 1700000000.5, "step": 12, "loss": 0.25, "lr": 0.0003}');
    expect(result).toEqual({
      ok: true,
      point: { ts: 1700000000500, step: 12, metrics: { loss: 0.25, lr: 0.0003 } },
    });
  });

  it('turns bare NaN, Infinity and -Infinity into numbers', () => {
    const result = parseMetricLine(
      '{"step": 3, "loss": NaN, "grad_norm": Infinity, "margin": -Infinity, "x": [NaN]}',
    );
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(Number.isNaN(result.point.metrics.loss)).toBe(true);
    expect(result.point.metrics.grad_norm).toBe(Number.POSITIVE_INFINITY);
    expect(result.point.metrics.margin).toBe(Number.NEGATIVE_INFINITY);
  });

  it('leaves strings that contain NaN or Infinity untouched', () => {
    const result = parseMetricLine(
      '{"step": 1, "note": "loss was NaN, now Infinity \\" -Infinity", "tag": "NaN", "loss": 1.5}',
    );
    expect(result).toEqual({ ok: true, point: { step: 1, metrics: { loss: 1.5 } } });
    // the bare-word rewrite must not have touched the string (JSON stays valid)
    expect(parseMetricLine('{"step": 1, "loss": 2, "name": "Infinity"}').ok).toBe(true);
  });

  it('merges a nested metrics object and ignores non-numeric values', () => {
    const result = parseMetricLine(
      '{"step": 5, "metrics": {"acc": 0.9}, "phase": "train", "ok": true, "n": null}',
    );
    expect(result).toEqual({ ok: true, point: { step: 5, metrics: { acc: 0.9 } } });
  });

  it('rejects malformed lines with a reason', () => {
    for (const line of ['{"step": 1, "loss": ', 'hello', '[1,2]', '{"phase": "x"}', '', '{"loss": NaNa}']) {
      const result = parseMetricLine(line);
      expect(result.ok, line).toBe(false);
      if (!result.ok) expect(result.reason.length).toBeGreaterThan(0);
    }
  });

  it('reports malformed lines once per run', () => {
    const book = { count: 0, reported: false };
    const first = recordMalformed(book, 2, 'not JSON', 'garbage');
    expect(first).toContain('garbage');
    expect(recordMalformed(book, 1, 'not JSON', 'more')).toBeUndefined();
    expect(recordMalformed(book, 0, undefined, undefined)).toBeUndefined();
    expect(book.count).toBe(3);
  });
});
