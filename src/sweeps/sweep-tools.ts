import { z } from 'zod';
import { definedOnly } from '../defined-only.js';
import { defineTool, type ToolDefinition } from '../tools/registry.js';
import { runReference } from '../tools/run-reference.js';
import type { CompareRuns } from './compare-runs.js';
import { parseGridEntry, type SweepSpec } from './sweep-grid.js';
import type { SweepService } from './sweep-service.js';

/** `start_sweep` and `compare_runs`: the same paths (and the same one card) as the plain commands. */
export function createSweepTools(sweeps: SweepService, compare: CompareRuns): ToolDefinition[] {
  return [
    defineTool({
      name: 'start_sweep',
      description:
        'Start a hyper-parameter sweep of a workspace script: the cross product of the grid, one approval card for all trials, a canary trial first, bad trials stopped early, a leaderboard at the end. Each trial gets its values as --key value arguments and in shepherd.config().',
      input: z.object({
        script: z.string().min(1).max(300).optional().describe('Path of the .py script in the workspace'),
        command: z
          .array(z.string().max(500))
          .min(1)
          .max(100)
          .optional()
          .describe(
            'Instead of script: a command argv run in the workspace, e.g. ["torchrun", "--nproc_per_node=2", "train.py"]',
          ),
        grid: z
          .record(
            z.string(),
            z
              .array(z.union([z.number(), z.string()]))
              .min(1)
              .max(32),
          )
          .describe('Values per hyper-parameter, e.g. {"lr": [1e-4, 3e-4], "bs": [16, 32]}'),
        gpus: z.number().int().min(0).max(64).optional().describe('GPUs per trial (default 0)'),
        hours: z.number().positive().max(720).optional().describe('Max hours per trial'),
        name: z.string().max(60).optional().describe('Sweep name; trials are <name>-1, <name>-2, …'),
        metric: z.string().max(64).optional().describe('Metric ranking the trials (default loss)'),
        mode: z.enum(['min', 'max']).optional().describe('Whether lower (min, default) or higher is better'),
        canary_steps: z
          .number()
          .int()
          .positive()
          .max(100_000)
          .optional()
          .describe('Healthy steps the canary must log first (default 20)'),
        parallel: z
          .number()
          .int()
          .positive()
          .max(64)
          .optional()
          .describe('Trials at once (default: as many as the GPUs allow)'),
        backend: z
          .string()
          .max(32)
          .optional()
          .describe(
            'Where every trial runs: local, slurm, k8s or hf (a configured backend); default: the default one',
          ),
      }),
      execute: async (input, context) => {
        const grid: SweepSpec['grid'] = [];
        for (const [key, values] of Object.entries(input.grid)) {
          const entry = parseGridEntry(`${key}=${values.join(',')}`);
          if (typeof entry === 'string') return entry;
          grid.push(entry);
        }
        if (grid.length === 0) return 'the grid is empty; give at least one hyper-parameter with values';
        if ((input.script === undefined) === (input.command === undefined))
          return 'give either script (a .py file) or command (an argv), not both or neither';
        const spec: SweepSpec = {
          ...definedOnly({ script: input.script, command: input.command }),
          grid,
          ...definedOnly({
            gpus: input.gpus,
            maxHours: input.hours,
            name: input.name,
            metric: input.metric,
            mode: input.mode,
            canarySteps: input.canary_steps,
            parallel: input.parallel,
            on: input.backend,
          }),
        };
        return sweeps.create(spec, context.threadId, context.actor, 'agent', { name: 'start_sweep', input });
      },
    }),
    defineTool({
      name: 'compare_runs',
      description:
        'Post one chart of a metric for several runs overlaid on the step axis, and return a table of each run’s final and best value.',
      input: z.object({
        runs: z.array(runReference()).min(2).max(12).describe('Run names or ids'),
        metric: z.string().max(64).optional().describe('Metric (default loss)'),
        steps: z
          .object({ from: z.number().int().min(0), to: z.number().int().min(0) })
          .optional()
          .describe('Only this step range'),
      }),
      execute: (input, context) =>
        compare({
          references: input.runs,
          threadId: context.threadId,
          ...definedOnly({ metric: input.metric, steps: input.steps }),
        }),
    }),
  ];
}
