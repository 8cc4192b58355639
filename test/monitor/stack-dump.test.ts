import { describe, expect, it } from 'vitest';
import {
  describeFrames,
  mainThreadOf,
  parseStackDump,
  renderStackDump,
} from '../../src/monitor/stack-dump.js';

// A real faulthandler dump (Python 3.11, all_threads=True) of a main thread blocked on a lock that
// another thread holds, with unrelated log lines around it.
const FAULTHANDLER = `step 40 done
Thread 0x00007f3ab2b2b6c0 (most recent call first):
  File "/work/train.py", line 5 in holder
  File "/usr/lib/python3.11/threading.py", line 982 in run
  File "/usr/lib/python3.11/threading.py", line 1045 in _bootstrap_inner
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f3ab3890b80 (most recent call first):
  File "/work/train.py", line 12 in all_reduce
  File "/work/train.py", line 18 in train_step
  File "/work/train.py", line 30 in <module>
[2026-12-02T13:00:00+00:00] still waiting`;

const PY_SPY = `Process 4242: python -u train.py
Python v3.11.2 (/usr/bin/python3.11)

Thread 4243 (idle): "Thread-1 (holder)"
    holder (train.py:5)
    run (threading.py:982)
Thread 4242 (idle): "MainThread"
    acquire_lock (train.py:9)
    all_reduce (train.py:12)
    <module> (train.py:30)
`;

describe('hang dump parsing', () => {
  it('finds every faulthandler thread and the main thread innermost first', () => {
    const threads = parseStackDump(FAULTHANDLER);
    expect(threads).toHaveLength(2);
    expect(threads[0]?.frames.map((frame) => frame.function)).toEqual([
      'holder',
      'run',
      '_bootstrap_inner',
      '_bootstrap',
    ]);
    const main = mainThreadOf(threads);
    expect(main?.current).toBe(true);
    expect(main && describeFrames(main)).toBe(
      'all_reduce (train.py:12) ← train_step (train.py:18) ← <module> (train.py:30)',
    );
    const rendered = renderStackDump(threads);
    expect(rendered).toContain('File "/work/train.py", line 5 in holder');
    expect(rendered).not.toContain('still waiting');
  });

  it('picks the main thread by its <module> frame even when another thread ran the handler', () => {
    const swapped = FAULTHANDLER.replace(
      'Current thread 0x00007f3ab3890b80',
      'Thread 0x00007f3ab3890b80',
    ).replace('Thread 0x00007f3ab2b2b6c0', 'Current thread 0x00007f3ab2b2b6c0');
    const main = mainThreadOf(parseStackDump(swapped));
    expect(main?.frames[0]?.function).toBe('all_reduce');
  });

  it("reads py-spy's dump and its MainThread name", () => {
    const threads = parseStackDump(PY_SPY);
    expect(threads).toHaveLength(2);
    const main = mainThreadOf(threads);
    expect(main?.name).toBe('MainThread');
    expect(main && describeFrames(main, 2)).toBe('acquire_lock (train.py:9) ← all_reduce (train.py:12)');
  });

  it('finds nothing in a log without a dump', () => {
    expect(
      parseStackDump('loss 0.3\nTraceback (most recent call last):\n  File "x.py", line 1, in <module>'),
    ).toEqual([]);
    expect(mainThreadOf([])).toBeUndefined();
  });
});
