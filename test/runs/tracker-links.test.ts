import { describe, expect, it } from 'vitest';
import { evaluate } from '../../src/monitor/evaluate.js';
import { createMonitorState } from '../../src/monitor/monitor-state.js';
import { createPrintedMetricsReader } from '../../src/monitor/printed-metrics.js';
import { DEFAULT_ROLLING_LIMITS } from '../../src/monitor/rolling-stats.js';
import { DEFAULT_DETECTOR_CONFIG } from '../../src/monitor/types.js';
import { findTrackerLinks, trackerLinkLines } from '../../src/runs/tracker-links.js';
import { testRunMeta } from '../helpers/run-meta.js';

/* Tracker links as the trackers print them at start (sources named beside each line). */

describe('tracker links in output.log', () => {
  it('finds W&B, MLflow, Trackio and TensorBoard, colours and all', () => {
    const links = findTrackerLinks(
      [
        // wandb/sdk/wandb_run.py (`_header_run_info`), coloured.
        'wandb: ⭐️ View project at \x1b[34m\x1b[4mhttps://wandb.ai/team/proj\x1b[0m',
        'wandb: 🚀 View run \x1b[33mglad-sun-3\x1b[0m at: \x1b[34m\x1b[4mhttps://wandb.ai/team/proj/runs/abc123\x1b[0m',
        // mlflow/tracking/_tracking_service/client.py, on run end.
        '🏃 View run bold-owl-42 at: http://127.0.0.1:5000/#/experiments/1/runs/4f2c9a',
        // trackio/run.py: local, then with a Space.
        '* View dashboard by running in your terminal: trackio show --project "gsm8k"',
        '* View dashboard by going to: https://huggingface.co/spaces/alice/trackio',
        'Run `tensorboard --logdir runs/exp1` to see the curves',
        'loss 0.5 at step 10',
      ],
      undefined,
    );
    expect(trackerLinkLines(links)).toEqual([
      { label: 'W&B', value: 'https://wandb.ai/team/proj/runs/abc123' },
      { label: 'MLflow', value: 'http://127.0.0.1:5000/#/experiments/1/runs/4f2c9a' },
      { label: 'Trackio', value: 'https://huggingface.co/spaces/alice/trackio' },
      { label: 'TensorBoard', value: 'tensorboard --logdir runs/exp1' },
    ]);
  });

  it('says nothing new when the lines hold no link or only what is known', () => {
    const known = { wandb: 'https://wandb.ai/a/b/runs/c' };
    expect(findTrackerLinks(['step 1 loss 0.5', 'View the docs'], known)).toBeUndefined();
    expect(findTrackerLinks(['wandb: 🚀 View run x at: https://wandb.ai/a/b/runs/d'], known)).toBeUndefined();
    // A URL replaces a command hint for the same tracker.
    expect(
      findTrackerLinks(['TensorBoard 2.16.2 at http://localhost:6006/ (Press CTRL+C to quit)'], {
        tensorboard: 'tensorboard --logdir runs',
      }),
    ).toEqual({ tensorboard: 'http://localhost:6006/' });
  });
});

describe('SHEPHERD_TRACKER_LINKS', () => {
  it('off: the tick looks for no link, and incidents carry none', () => {
    const meta = testRunMeta('r1', { name: 'gpt' });
    const wandb = 'wandb: 🚀 View run x at: https://wandb.ai/a/b/runs/c';
    const tick = (trackerLinks: boolean) => {
      const state = createMonitorState();
      const evaluation = evaluate(
        state,
        { lines: ['{"step": 1, "loss": NaN}'], reset: false, more: false },
        { lines: [wandb], reset: false, more: false },
        { kind: 'alive' },
        1,
        {
          meta,
          detectors: DEFAULT_DETECTOR_CONFIG,
          limits: DEFAULT_ROLLING_LIMITS,
          printedMetrics: createPrintedMetricsReader({}),
          trackerLinks,
        },
      );
      return { state, evaluation };
    };
    const on = tick(true);
    expect(on.evaluation.linksFound).toBe(true);
    expect(on.evaluation.incidents[0]?.links).toEqual({ wandb: 'https://wandb.ai/a/b/runs/c' });
    const off = tick(false);
    expect(off.evaluation.linksFound).toBe(false);
    expect(off.state.links).toBeUndefined();
    expect(off.evaluation.incidents[0]?.kind).toBe('nan');
    expect(off.evaluation.incidents[0]?.links).toBeUndefined();
  });
});
