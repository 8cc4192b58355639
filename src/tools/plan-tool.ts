import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { Card } from '../bot/chat-adapter.js';
import type { Notifier } from '../bot/notifier.js';
import { defineTool, type ToolDefinition } from './registry.js';

/**
 * The agent's visible plan: `plan {steps}` writes a short checklist for work of more than two steps.
 * The thread shows it as one card, posted the first time and edited in place on each update; `session`
 * shows it too. Each call sends the whole list, so the card always matches what the model last said.
 */

/** A plan lives as long as a thread's session (90 days). */
const PLAN_KEEP_S = 90 * 24 * 3600;

const STATUS_MARK = { pending: '⬜', running: '▶️', done: '✅', failed: '❌' } as const;

const stepSchema = z.object({
  title: z
    .string()
    .trim()
    .min(1)
    .max(160)
    .describe('What this step does, e.g. "Research TRL GRPOTrainer usage"'),
  status: z.enum(['pending', 'running', 'done', 'failed']).describe('pending, running, done or failed'),
});
const planInput = z.object({
  steps: z
    .array(stepSchema)
    .min(1)
    .max(15)
    .describe("The whole checklist, in order, with each step's status"),
});
type PlanStep = z.infer<typeof stepSchema>;

const storedSchema = z.object({ steps: z.array(stepSchema), messageId: z.string().optional() });

export interface Plans {
  set(threadId: string, steps: PlanStep[]): Promise<void>;
  /** The thread's plan as text lines, or undefined when it has none. */
  describe(threadId: string): Promise<string | undefined>;
}

function planLines(steps: PlanStep[]): string {
  return steps
    .map((step, index) => `${STATUS_MARK[step.status]} ${index + 1}. ${step.title} (${step.status})`)
    .join('\n');
}

function planCard(steps: PlanStep[]): Card {
  const done = steps.filter((step) => step.status === 'done').length;
  return { title: `Plan (${done}/${steps.length} done)`, text: planLines(steps) };
}

export function createPlans(options: { redis: Redis; prefix: string; notifier: Notifier }): Plans {
  const key = (threadId: string) => `${options.prefix}:plan:${threadId}`;
  async function load(threadId: string) {
    const raw = await options.redis.get(key(threadId));
    if (raw === null) return undefined;
    try {
      const parsed = storedSchema.safeParse(JSON.parse(raw));
      return parsed.success ? parsed.data : undefined;
    } catch {
      return undefined;
    }
  }
  return {
    async set(threadId, steps) {
      const stored = await load(threadId);
      const card = planCard(steps);
      let messageId = stored?.messageId;
      if (messageId === undefined) messageId = (await options.notifier.postCard(threadId, card)).messageId;
      else await options.notifier.updateCard(threadId, messageId, card);
      await options.redis.set(key(threadId), JSON.stringify({ steps, messageId }), 'EX', PLAN_KEEP_S);
    },
    async describe(threadId) {
      const stored = await load(threadId);
      return stored === undefined ? undefined : planLines(stored.steps);
    },
  };
}

export function createPlanTool(plans: Plans): ToolDefinition {
  return defineTool({
    name: 'plan',
    description:
      "Show or update the thread's plan: a short checklist for work of more than two steps. Send the whole list each time with each step pending, running, done or failed; the plan card in the thread is edited in place.",
    input: planInput,
    async execute(input, context) {
      await plans.set(context.threadId, input.steps);
      const count = (status: PlanStep['status']) =>
        input.steps.filter((step) => step.status === status).length;
      return `Plan shown in the thread: ${input.steps.length} steps (${count('done')} done, ${count('running')} running, ${count('pending')} pending, ${count('failed')} failed).`;
    },
  });
}
