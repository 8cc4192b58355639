import { describe, expect, it } from 'vitest';
import { createStdoutParser, createStdoutParseState } from '../../src/runs/stdout-metrics/stdout-parser.js';

/*
 * Edges of the printed-metrics scanners: names matched in place through the name table, reads at the very end
 * of a line, the bar counter found by hand and `\r` redraws read without splitting. Each expectation is what
 * the parser gave before those were written (a slice per name, a regular expression for the bar).
 */

function parseOne(line: string) {
  return createStdoutParser().parseLines([line], createStdoutParseState()).points;
}

function metricsOf(line: string) {
  return parseOne(line).map((point) => [point.step, point.metrics]);
}

describe('key-value names', () => {
  it('folds case, keeps the first of a repeated name and skips bookkeeping and inherited names', () => {
    expect(metricsOf('Step 3 LOSS=1.5 Loss=2 loss=3')).toEqual([[3, { loss: 1.5 }]]);
    expect(metricsOf('step 3 loss=1 V_NUM=4 v_num=5')).toEqual([[3, { loss: 1 }]]);
    // `{}` already answers to these (case-folded) names, so they were never stored.
    expect(metricsOf('loss=1 constructor=2 toString=3 __proto__=4 valueOf: 5 hasOwnProperty 6')).toEqual([
      [0, { loss: 1, tostring: 3, valueof: 5, hasownproperty: 6 }],
    ]);
  });

  it('names units, and reads names up to 64 characters', () => {
    expect(metricsOf('iter 4: loss 2, time 35ms, data 1.5s, mfu 31.25%')).toEqual([
      [4, { loss: 2, time_ms: 35, data_s: 1.5, mfu: 31.25 }],
    ]);
    const long = 'a'.repeat(64);
    expect(metricsOf(`loss 1 ${long}=2 ${long}b=3`)).toEqual([[0, { loss: 1, [long]: 2 }]]);
  });

  it('reads only ASCII names, not glued to a word or number, and skips values glued to text', () => {
    expect(metricsOf('loss 1 lössé 2 x_acc=3 5acc=4 acc=5x lr=6_ tok=7.')).toEqual([
      [0, { loss: 1, x_acc: 3, tok: 7 }],
    ]);
    expect(metricsOf('Epoch 1/3 step 5 eval/loss=0.5 top-1=0.9')).toEqual([
      [5, { epoch: 1, 'eval/loss': 0.5, 'top-1': 0.9 }],
    ]);
  });

  it('stops cleanly at the end of a line, whatever it ends with', () => {
    for (const line of [
      'loss',
      'loss ',
      'loss=',
      'loss: ',
      'loss -',
      'loss .',
      'loss 1e',
      'loss 5m',
      'loss 1e+',
    ])
      expect(metricsOf(line), line).toEqual([]);
    expect(metricsOf('loss 5.')).toEqual([[0, { loss: 5 }]]);
    expect(metricsOf('loss 5%')).toEqual([[0, { loss: 5 }]]);
    expect(metricsOf('step 2 loss 7ms')).toEqual([[2, { loss_ms: 7 }]]);
    expect(metricsOf('step 2 loss 7s')).toEqual([[2, { loss_s: 7 }]]);
    expect(metricsOf('step 2 loss nan')[0]?.[1]).toEqual({ loss: Number.NaN });
    expect(metricsOf('step 2 loss -inf')).toEqual([[2, { loss: Number.NEGATIVE_INFINITY }]]);
  });

  it('reads every name right when more names pass through the table than it holds', () => {
    const lines: string[] = [];
    for (let index = 0; index < 3000; index++)
      lines.push(`step ${index} loss=${index} metric_${index}=${index * 2}`);
    const points = createStdoutParser().parseLines(lines, createStdoutParseState()).points;
    expect(points).toHaveLength(3000);
    for (const [index, point] of points.entries()) {
      expect(point.step).toBe(index);
      expect(point.metrics).toEqual({ loss: index, [`metric_${index}`]: index * 2 });
    }
  });
});

describe('python-dict keys', () => {
  it('reads any quoted key as printed, a repeated key keeping the last value', () => {
    expect(metricsOf("{'lössé': 1.5, 'Loss': 2, '': 3, 'a b': 4}")).toEqual([
      [0, { lössé: 1.5, Loss: 2, '': 3, 'a b': 4 }],
    ]);
    expect(metricsOf("{'loss': 1, 'loss': 2, 'step': 9}")).toEqual([[9, { loss: 2 }]]);
    expect(metricsOf("{'__proto__': 1, 'constructor': 2}")).toEqual([[0, { constructor: 2 }]]);
    expect(metricsOf("{'loss': 1, 'unclosed: 2}")).toEqual([[0, { loss: 1 }]]);
    expect(metricsOf(`{'${'k'.repeat(80)}': 1, '${'k'.repeat(81)}': 2}`)).toEqual([
      [0, { ['k'.repeat(80)]: 1 }],
    ]);
  });
});

describe('progress bars', () => {
  function stepAfter(segments: string[]): number | undefined {
    const parser = createStdoutParser();
    const state = createStdoutParseState();
    return parser.parseLines([`${segments.join('\r')}\r{'loss': 1}`], state).points[0]?.step;
  }

  it('takes the first n/total [ with whole numbers on both sides, not after another /', () => {
    expect(stepAfter(['| 7/10 [00:01<00:09]'])).toBe(7);
    expect(stepAfter(['7/10 [=====>....]'])).toBe(7);
    expect(stepAfter(['x7/10 [..]'])).toBe(7);
    expect(stepAfter(['/7/10 [..]'])).toBe(0);
    expect(stepAfter(['1/7/10 [..]'])).toBe(0);
    expect(stepAfter(['7/10[..]', '7/ 10 [..]', '7/10  [..]', '7/10 ', '/10 [', '7/ ['])).toBe(0);
    expect(stepAfter(['a/b 3/4/5 [ 6/8 [..]'])).toBe(6);
    expect(stepAfter(['0007/0010 [..]'])).toBe(7);
    expect(stepAfter(['11/10 [..]', '0/0 [..]'])).toBe(0);
  });

  it('reads bar counters longer than 15 digits as Number() does', () => {
    const parser = createStdoutParser();
    const state = createStdoutParseState();
    parser.parseLines(['123456789012345678/1234567890123456789 [..]'], state);
    expect(state.bar).toEqual({
      n: Number('123456789012345678'),
      total: Number('1234567890123456789'),
      offset: 0,
      used: false,
    });
  });

  it('reads redraws split by any run of \\r, skipping pieces too short to hold anything', () => {
    expect(stepAfter(['', '5/10 [', '', 'ab', '6/10 [', ' '])).toBe(6);
    const parser = createStdoutParser();
    const state = createStdoutParseState();
    expect(parser.parseLines(['\r\r5/9 [\r', '6/9 [\r\r\r'], state)).toEqual({ points: [] });
    expect(state.bar).toEqual({ n: 6, total: 9, offset: 0, used: false });
    expect(
      parser.parseLines(['loss 1\rloss 2\r\rloss 3'], state).points.map((point) => point.metrics),
    ).toEqual([{ loss: 1 }, { loss: 2 }, { loss: 3 }]);
  });
});
