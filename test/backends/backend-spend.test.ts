import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { estimateRunCostUsd } from '../../src/runs/run-cost.js';
import { usageOf } from '../../src/spend/usage.js';
import { testRunMeta } from '../helpers/run-meta.js';

describe('spend and estimates by backend', () => {
  it('prices a run by its backend’s hourly price when it has one, else GPUs × the GPU-hour price', async () => {
    // Two runs of two hours each (no audit trail: their start and end), one on a local GPU, one on an
    // HF flavour priced at $4.50/h for the whole machine.
    const start = '2026-12-01T10:00:00.000Z';
    const end = '2026-12-01T12:00:00.000Z';
    const local = testRunMeta('r-local', { gpus: 2, status: 'completed', startedAt: start, endedAt: end });
    const hf = testRunMeta('r-hf', {
      gpus: 1,
      executor: 'hfjobs',
      hourlyUsd: 4.5,
      status: 'completed',
      startedAt: start,
      endedAt: end,
    });
    const runsDir = mkdtempSync(join(tmpdir(), 'shepherd-spend-'));
    const usages = await usageOf(
      [local, hf],
      (id) => join(runsDir, id),
      { from: new Date('2026-12-01T00:00:00Z'), to: new Date('2026-12-02T00:00:00Z') },
      2.5,
    );
    expect(usages.map((usage) => [usage.meta.id, usage.hours, usage.usd])).toEqual([
      ['r-local', 2, 10],
      ['r-hf', 2, 9],
    ]);
    expect(estimateRunCostUsd({ gpus: 1, maxHours: 3, hourlyUsd: 4.5 }, 2.5)).toBe(13.5);
    expect(estimateRunCostUsd({ gpus: 2, maxHours: 3 }, 2.5)).toBe(15);
  });
});
