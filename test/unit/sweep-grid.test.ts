import { describe, expect, it } from 'vitest';
import type { AuditEntry } from '../../src/runs/records/audit-log.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { runningIntervals } from '../../src/spend/usage.js';
import { summarise } from '../../src/sweeps/leaderboard.js';
import { expandGrid, parseSweepTokens, trialArgs } from '../../src/sweeps/sweep-grid.js';

describe('sweep grid', () => {
  it('parses the command and expands the cross product, first key slowest', () => {
    const parsed = parseSweepTokens(
      'train.py --grid lr=1e-4,3e-4 --grid bs=16,32 --gpus 2 --hours 1.5 --name x --metric acc --mode max --canary-steps 5 --parallel 3'.split(
        ' ',
      ),
    );
    expect(parsed?.ok).toBe(true);
    if (parsed?.ok !== true) return;
    expect(parsed.spec).toMatchObject({
      gpus: 2,
      maxHours: 1.5,
      name: 'x',
      metric: 'acc',
      mode: 'max',
      canarySteps: 5,
      parallel: 3,
    });
    const trials = expandGrid(parsed.spec.grid);
    expect(trials).toEqual([
      { lr: 0.0001, bs: 16 },
      { lr: 0.0001, bs: 32 },
      { lr: 0.0003, bs: 16 },
      { lr: 0.0003, bs: 32 },
    ]);
    expect(trialArgs(trials[3] ?? {})).toEqual(['--lr', '0.0003', '--bs', '32']);
  });

  it('answers bad input with a sentence and leaves sentences to the agent', () => {
    expect(parseSweepTokens('the learning rate please'.split(' '))).toBeUndefined();
    const errors = [
      'train.py',
      'train.py --grid lr',
      'train.py --grid lr=1 --grid lr=2',
      'train.py --grid lr=1 --mode best',
      'train.py --grid lr=1 --parallel 0',
      'train.py --grid lr=1 --bogus 1',
      'train.py --grid lr=$(rm)',
    ];
    for (const text of errors) expect(parseSweepTokens(text.split(' '))?.ok, text).toBe(false);
    // `sweep [options] -- <command…>`: the options come before `--`.
    const command = parseSweepTokens(['--grid', 'lr=1,2'], ['torchrun', 'train.py', '--epochs', '3']);
    expect(command?.ok && command.spec.command).toEqual(['torchrun', 'train.py', '--epochs', '3']);
    expect(parseSweepTokens([], ['python', 'x.py', '--grid', 'lr=1'])).toMatchObject({
      ok: false,
      error: expect.stringContaining('before `--`'),
    });
  });

  it('summarises best/final skipping NaN and remembers the first non-finite step', () => {
    const summary = summarise(
      [
        { step: 1, value: 3 },
        { step: 2, value: 1 },
        { step: 3, value: Number.NaN },
        { step: 4, value: 2 },
      ],
      'min',
    );
    expect(summary.best).toEqual({ value: 1, step: 2 });
    expect(summary.final).toEqual({ value: 2, step: 4 });
    expect(summary.firstNonFinite).toBe(3);
    expect(summary.finiteCount).toBe(3);
  });

  it('counts only the stretches a run spent running (pause and resume)', () => {
    const entry = (ts: string, from: AuditEntry['from'], to: AuditEntry['to']): AuditEntry => ({
      ts,
      runId: 'r',
      from,
      to,
      by: 'system',
    });
    const meta = {
      status: 'completed',
      endedAt: '2026-01-01T03:00:00Z',
      updatedAt: '2026-01-01T03:00:00Z',
    } as RunMeta;
    const intervals = runningIntervals(
      [
        entry('2026-01-01T00:00:00Z', null, 'pending_approval'),
        entry('2026-01-01T00:10:00Z', 'queued', 'running'),
        entry('2026-01-01T00:40:00Z', 'running', 'paused'),
        entry('2026-01-01T02:00:00Z', 'queued', 'running'),
        entry('2026-01-01T02:30:00Z', 'running', 'completed'),
      ],
      meta,
      new Date('2026-01-02T00:00:00Z'),
    );
    const minutes = intervals.reduce((sum, [start, end]) => sum + (end - start) / 60_000, 0);
    expect(minutes).toBe(60);
  });
});
