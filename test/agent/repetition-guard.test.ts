import { describe, expect, it } from 'vitest';
import { callSignature, createRepetitionGuard, detectRepetition } from '../../src/agent/repetition-guard.js';

const sig = (name: string, args = '{}', result = 'r') => callSignature({ name, arguments: args }, result);
const A = sig('a');
const B = sig('b');
const C = sig('c');
const D = sig('d');
const E = sig('e');

describe('detectRepetition', () => {
  it('flags three identical calls in a row', () => {
    expect(detectRepetition([A, A])).toBeUndefined();
    expect(detectRepetition([A, A, A])).toBe('identical');
    expect(detectRepetition([B, C, A, A, A])).toBe('identical');
    expect(detectRepetition([A, A, B, A])).toBeUndefined();
  });

  it('treats key order as the same call but a different result or argument as different', () => {
    const first = sig('status', '{"run":"x","verbose":true}');
    const reordered = sig('status', '{"verbose":true,"run":"x"}');
    expect(detectRepetition([first, reordered, first])).toBe('identical');
    expect(
      detectRepetition([
        sig('status', '{}', 'step 1'),
        sig('status', '{}', 'step 2'),
        sig('status', '{}', 'step 3'),
      ]),
    ).toBeUndefined();
    expect(
      detectRepetition([sig('s', '{"run":"x"}'), sig('s', '{"run":"y"}'), sig('s', '{"run":"x"}')]),
    ).toBeUndefined();
  });

  it('flags a 2-call cycle repeated three times, not twice', () => {
    expect(detectRepetition([A, B, A, B])).toBeUndefined();
    expect(detectRepetition([A, B, A, B, A])).toBeUndefined();
    expect(detectRepetition([A, B, A, B, A, B])).toBe('cycle');
    expect(detectRepetition([C, A, B, A, B, A, B])).toBe('cycle');
  });

  it('flags 3- to 5-call cycles repeated twice', () => {
    expect(detectRepetition([A, B, C, A, B, C])).toBe('cycle');
    expect(detectRepetition([A, B, C, D, A, B, C, D])).toBe('cycle');
    expect(detectRepetition([A, B, C, D, E, A, B, C, D, E])).toBe('cycle');
    expect(detectRepetition([A, B, C, A, B, D])).toBeUndefined();
    expect(detectRepetition([A, B, C, D, E, C, D, E, A, B])).toBeUndefined();
  });
});

describe('createRepetitionGuard', () => {
  it('fires once, then needs fresh repetition', () => {
    const guard = createRepetitionGuard();
    const call = { name: 'a', arguments: '{}' };
    guard.record(call, 'r');
    guard.record(call, 'r');
    expect(guard.check()).toBeUndefined();
    guard.record(call, 'r');
    expect(guard.check()).toBe('identical');
    guard.record(call, 'r');
    expect(guard.check()).toBeUndefined();
  });
});
