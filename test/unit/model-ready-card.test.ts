import { describe, expect, it } from 'vitest';
import { modelReadyCard } from '../../src/hub/model-ready-card.js';
import type { ModelSummary } from '../../src/hub/model-summary.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';

/* The model-ready card shows the run's tracker links, as the alert and finished cards do. */

const meta = {
  id: 'r1',
  name: 'llama-sft',
  model: { path: '/runs/r1/final', info: {}, savedAt: '2026-01-01T00:00:00Z' },
} as unknown as RunMeta;
const summary = {
  metric: { name: 'loss', mode: 'min', final: 0.5, best: 0.4, bestStep: 90 },
  evalResults: {},
  gpuHours: 1,
  costUsd: 2,
} as unknown as ModelSummary;

describe('model-ready card', () => {
  it('lists the tracker links the finished incident carries', () => {
    const links = {
      wandb: 'https://wandb.ai/team/proj/runs/abc123',
      tensorboard: 'tensorboard --logdir runs',
    };
    const fields = modelReadyCard(meta, summary, undefined, links).fields ?? [];
    expect(fields).toContainEqual({ label: 'W&B', value: links.wandb });
    expect(fields).toContainEqual({ label: 'TensorBoard', value: links.tensorboard });
  });

  it('has none without links (SHEPHERD_TRACKER_LINKS=off: the incident carries none)', () => {
    const labels = (modelReadyCard(meta, summary, undefined).fields ?? []).map((field) => field.label);
    expect(labels).not.toContain('W&B');
    expect(labels).toContain('Cost');
  });
});
