import { describe, expect, it } from 'vitest';
import { scanNumber, scanned } from '../../src/runs/stdout-metrics/scan.js';
import { createStdoutParser, createStdoutParseState } from '../../src/runs/stdout-metrics/stdout-parser.js';

/*
 * The printed-metrics number scanner builds short decimals from their digits (one exact multiply or
 * divide by a power of ten) instead of slicing the text for Number(). It must read every number exactly
 * as Number() does, and stop where it did.
 */

/** Number() of the scanned text, as the scanner did before its fast path. */
function byNumber(text: string): { value: number | undefined; end: number } {
  const match = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/.exec(text);
  if (match === null) return { value: undefined, end: -1 };
  return { value: Number(match[0]), end: match[0].length };
}

function randomOf(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = Math.imul(state ^ (state >>> 15), 1 | state);
    mixed = (mixed + Math.imul(mixed ^ (mixed >>> 7), 61 | mixed)) ^ mixed;
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4294967296;
  };
}

function digits(random: () => number, most: number): string {
  let text = '';
  for (let count = Math.floor(random() * most); count > 0; count--) text += String(Math.floor(random() * 10));
  return text;
}

/** Decimals as loggers print them: signs, leading zeros, no integer part, exponents, long mantissas. */
function randomNumberText(random: () => number): string {
  const sign = ['', '', '-', '+'][Math.floor(random() * 4)] as string;
  const integer = random() < 0.2 ? '' : digits(random, 20) || '0';
  const fraction = random() < 0.3 ? '' : `.${digits(random, 20)}`;
  const body = integer === '' && fraction.length < 2 ? `0${fraction}` : `${integer}${fraction}`;
  const exponent =
    random() < 0.3
      ? `${random() < 0.5 ? 'e' : 'E'}${['', '-', '+'][Math.floor(random() * 3)]}${digits(random, 4) || '5'}`
      : '';
  return `${sign}${body}${exponent}`;
}

describe('number scanner', () => {
  it('reads random decimals exactly as Number() does, and ends where the number ends', () => {
    const random = randomOf(27);
    for (let round = 0; round < 200_000; round++) {
      const text = randomNumberText(random);
      const expected = byNumber(text);
      const value = scanNumber(`${text},`, 0);
      if (!Object.is(value, expected.value) || scanned.end !== expected.end)
        throw new Error(`${text}: ${value} (end ${scanned.end}) vs ${expected.value} (end ${expected.end})`);
    }
  });

  it('reads the edge cases: exponents, negatives, zero signs, long and huge numbers, nan and inf', () => {
    const cases: Array<[string, number]> = [
      ['5e-05', 5e-5],
      ['3E+4', 3e4],
      ['-1.5e-3', -1.5e-3],
      ['-0', -0],
      ['-0.0', -0],
      ['0.1', 0.1],
      ['.5', 0.5],
      ['-.25', -0.25],
      ['7.', 7],
      ['1e22', 1e22],
      ['1e23', 1e23],
      ['123456789012345678', Number('123456789012345678')],
      ['0.30000000000000004', 0.30000000000000004],
      ['9007199254740993', Number('9007199254740993')],
      ['1e400', Number.POSITIVE_INFINITY],
      ['2e-400', 0],
      ['nan', Number.NaN],
      ['-inf', Number.NEGATIVE_INFINITY],
      ['Infinity', Number.POSITIVE_INFINITY],
    ];
    for (const [text, expected] of cases) expect(scanNumber(text, 0), text).toBe(expected);
    expect(scanNumber('1e', 0)).toBe(1);
    expect(scanned.end).toBe(1);
    expect(scanNumber('-', 0)).toBeUndefined();
    expect(scanNumber('.', 0)).toBeUndefined();
  });

  it('reads ANSI-coloured lines with the fast path as plain ones', () => {
    const parser = createStdoutParser();
    const plain = parser.parseLines(
      ['step 12 | loss -1.25e-2 | lr 3e-4', "{'loss': 0.4321, 'grad_norm': nan, 'learning_rate': 5e-05}"],
      createStdoutParseState(),
    );
    const coloured = parser.parseLines(
      [
        '\x1b[1mstep\x1b[0m \x1b[36m12\x1b[0m | loss \x1b[31m-1.25e-2\x1b[0m | lr 3e-4',
        "\x1b[32m{'loss': 0.4321, 'grad_norm': nan, 'learning_rate': 5e-05}\x1b[0m",
      ],
      createStdoutParseState(),
    );
    expect(coloured.points).toEqual(plain.points);
    expect(plain.points[0]).toMatchObject({ step: 12, metrics: { loss: -0.0125, lr: 0.0003 } });
    expect(plain.points[1]?.metrics.learning_rate).toBe(5e-5);
    expect(plain.points[1]?.metrics.grad_norm).toBeNaN();
  });
});
