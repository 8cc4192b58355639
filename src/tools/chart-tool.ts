import { z } from 'zod';
import type { ChartRequest } from '../charts/metrics-chart.js';
import { definedOnly } from '../defined-only.js';
import { defineTool } from './registry.js';
import { runReference } from './run-reference.js';

/** `show_metrics`: posts a chart of a run's metrics into the thread. */
export function createShowMetricsTool(postChart: (request: ChartRequest) => Promise<string>) {
  return defineTool({
    name: 'show_metrics',
    description:
      'Post a chart of a run’s metrics into the thread (downsampled, NaN points marked). Use it when someone asks how a run is going or wants to see a curve.',
    input: z.object({
      run: runReference(),
      metrics: z
        .array(z.string().min(1).max(64))
        .max(8)
        .optional()
        .describe('Metric names, e.g. ["loss"]; default loss'),
      steps: z
        .object({
          from: z.number().int().min(0).describe('First step'),
          to: z.number().int().min(0).describe('Last step'),
        })
        .optional()
        .describe('Only this step range'),
    }),
    execute: (input, context) =>
      postChart({
        run: input.run,
        threadId: context.threadId,
        ...definedOnly({ metrics: input.metrics, steps: input.steps }),
      }),
  });
}
