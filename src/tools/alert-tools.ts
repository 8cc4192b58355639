import { z } from 'zod';
import type { AlertRuleOperations } from '../monitor/alerts/alert-rule-operations.js';
import { MUTABLE_DETECTORS } from '../monitor/policy-checks.js';
import { defineTool, type ToolDefinition } from './registry.js';
import { runReference } from './run-reference.js';

/** The agent's alert tools: the same operations as the `alert`, `alerts` and `mute` commands. */
export function createAlertTools(operations: AlertRuleOperations): ToolDefinition[] {
  return [
    defineTool({
      name: 'add_alert_rule',
      description:
        'Add an alert rule to a run: Shepherd posts an alert with a chart once each time the condition becomes true. Examples of `when`: "eval_loss > 2.5", "reward < 0.2 for 100 steps", "step < 1000 at 2h" (checked once, 2 h after the start).',
      input: z.object({
        run: runReference(),
        when: z
          .string()
          .min(3)
          .max(200)
          .describe('<metric> <op> <value> [for N steps | at <duration>]; op is one of > >= < <= == !='),
      }),
      execute: (input, context) => operations.addRule(input.run, input.when, context.actor),
    }),
    defineTool({
      name: 'list_alert_rules',
      description: "List a run's alert rules and muted detectors.",
      input: z.object({ run: runReference() }),
      execute: (input) => operations.list(input.run),
    }),
    defineTool({
      name: 'mute_alert',
      description:
        'Mute (or unmute) one detector on a run, e.g. when the team knows a plateau is expected. Muting is recorded with who asked.',
      input: z.object({
        run: runReference(),
        detector: z.enum(MUTABLE_DETECTORS).describe('Which detector'),
        for: z
          .string()
          .max(20)
          .optional()
          .describe('How long, e.g. "2h" or "30m"; leave out to mute until unmuted'),
        unmute: z.boolean().optional().describe('true to turn the detector back on'),
      }),
      execute: (input, context) =>
        input.unmute === true
          ? operations.unmute(input.run, input.detector, context.actor)
          : operations.mute(input.run, input.detector, input.for, context.actor),
    }),
  ];
}
