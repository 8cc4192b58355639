import { z } from 'zod';
import { ToolPolicyError } from '../errors.js';
import { FOLLOW_EVENTS, type RunFollows } from '../runs/operations/run-follows.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { defineTool, type ToolDefinition } from './registry.js';
import { runReference } from './run-reference.js';

/** Statuses after which none of the followed events can happen any more. */
const OVER: ReadonlySet<RunMeta['status']> = new Set(['completed', 'stopped', 'rejected']);

interface FollowToolsOptions {
  follows: RunFollows;
  findRun(run: string): Promise<RunMeta>;
  maxTurns: number;
}

/** `follow_run` / `unfollow_run`: come back to the thread when a run ends, fails, alerts or stalls. */
export function createFollowTools(options: FollowToolsOptions): ToolDefinition[] {
  const { follows } = options;
  return [
    defineTool({
      name: 'follow_run',
      description:
        'Come back to this thread when a run finishes, fails, raises an alert or stalls: you then get one note with the step, the loss and your `note`, and one turn to act (answer, or start the next step through approval). Offer it when someone says "when it is done…". Each event fires once per launch; following again replaces the earlier follow.',
      input: z.object({
        run: runReference(),
        events: z
          .array(z.enum(FOLLOW_EVENTS))
          .min(1)
          .max(4)
          .describe('Which events to come back for: finished, failed, alert, stalled'),
        note: z
          .string()
          .min(1)
          .max(1000)
          .describe('What to do then, in the words you will read later, e.g. "evaluate on the test split"'),
      }),
      async execute(input, context) {
        const meta = await options.findRun(input.run);
        if (OVER.has(meta.status)) {
          throw new ToolPolicyError(
            'run_over',
            `${meta.name} is already ${meta.status}${meta.lastStep === undefined ? '' : ` (last step ${meta.lastStep})`}; there is nothing left to wait for. Act on it now instead.`,
          );
        }
        const events = [...new Set(input.events)];
        const previous = await follows.get(meta.id);
        await follows.follow({
          runId: meta.id,
          runName: meta.name,
          threadId: context.threadId,
          events,
          note: input.note,
          by: context.actor,
        });
        const left = Math.max(0, options.maxTurns - (await follows.turnsUsed(meta.id)));
        const replaced =
          previous === undefined
            ? ''
            : previous.threadId === context.threadId
              ? ` This replaces the earlier follow ("${previous.note}").`
              : ` This replaces a follow ${previous.by.name} set in another thread, which will no longer hear about it.`;
        return `Following ${meta.name} (${meta.id}, now ${meta.status}) for: ${events.join(', ')}. When it happens you get a note in this thread and one turn; ${left} follow-up turn${left === 1 ? '' : 's'} left for this run.${replaced} Tell the people in the thread.`;
      },
    }),
    defineTool({
      name: 'unfollow_run',
      description: 'Stop following a run (no more notes or turns for it in this thread).',
      input: z.object({ run: runReference() }),
      async execute(input) {
        const meta = await options.findRun(input.run);
        const removed = await follows.unfollow(meta.id);
        return removed === undefined
          ? `Nobody was following ${meta.name}.`
          : `Stopped following ${meta.name} (was: ${removed.events.join(', ')}; "${removed.note}").`;
      },
    }),
  ];
}
