import { describe, expect, it } from 'vitest';
import { until, untilEvery } from '../helpers/until.js';

describe('until', () => {
  it('waits on an async probe for its value, not for the promise', async () => {
    let calls = 0;
    const value = await until(async () => {
      calls += 1;
      return calls >= 3 ? { calls } : undefined;
    }, 'the third call');
    expect(value).toEqual({ calls: 3 });
  });

  it('treats false as not yet, and resolves with the first other value', async () => {
    let calls = 0;
    expect(await until(() => (++calls >= 2 ? 0 : false), 'a zero')).toBe(0);
    expect(calls).toBe(2);
  });

  it('fails naming what it waited for', async () => {
    await expect(until(() => undefined, 'the moon', 60, 10)).rejects.toThrow(
      'timed out waiting for the moon',
    );
  });

  it('untilEvery keeps its own default timeout, and a call may still give one', async () => {
    const patient = untilEvery({ timeoutMs: 60, intervalMs: 10 });
    const started = Date.now();
    await expect(patient(() => false, 'never')).rejects.toThrow('timed out waiting for never');
    expect(Date.now() - started).toBeLessThan(15_000);
    await expect(patient(() => false, 'never, briefly', 20)).rejects.toThrow(/never, briefly/);
  });
});
