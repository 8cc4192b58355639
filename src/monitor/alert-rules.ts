import { z } from 'zod';

/**
 * Alert rules people set from chat: `<metric> <op> <value> [for N steps]` (checked on every logged point;
 * with `for N steps` the condition must hold continuously for N steps) or `<metric> <op> <value> at 2h`
 * (checked once, when the run has been running that long). `step` is a metric too.
 */

const RULE_OPERATORS = ['>', '>=', '<', '<=', '==', '!='] as const;
type RuleOperator = (typeof RULE_OPERATORS)[number];

const person = z.object({ id: z.string(), name: z.string() });

/** A rule as stored (read back from Redis against this schema). */
export const alertRuleSchema = z.object({
  id: z.string(),
  metric: z.string(),
  op: z.enum(RULE_OPERATORS),
  value: z.number(),
  /** The condition must hold for this many steps. */
  forSteps: z.number().optional(),
  /** Checked once at this many seconds after the run started. */
  atS: z.number().optional(),
  /** The rule as people wrote it (normalised), shown in lists and alerts. */
  text: z.string(),
  createdBy: person,
  createdAt: z.string(),
});
export type AlertRule = z.output<typeof alertRuleSchema>;

export type RuleSpec = Pick<AlertRule, 'metric' | 'op' | 'value' | 'forSteps' | 'atS' | 'text'>;

export class RuleParseError extends Error {
  readonly code = 'invalid_rule';
}

const DURATION = /^(\d+(?:\.\d+)?)\s*(s|sec|secs|m|min|mins|h|hr|hrs|hours?|d|days?)$/i;

/** "90m", "2h", "1.5h", "1d" → seconds. */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text.trim());
  if (match === null) return undefined;
  const amount = Number(match[1]);
  const unit = (match[2] ?? 's').toLowerCase();
  const factor = unit.startsWith('d') ? 86_400 : unit.startsWith('h') ? 3600 : unit.startsWith('m') ? 60 : 1;
  const seconds = amount * factor;
  return seconds > 0 ? seconds : undefined;
}

export function formatDurationShort(seconds: number): string {
  if (seconds % 86_400 === 0) return `${seconds / 86_400}d`;
  if (seconds % 3600 === 0) return `${seconds / 3600}h`;
  if (seconds % 60 === 0) return `${seconds / 60}m`;
  return `${seconds}s`;
}

/** Parses the text after `when`: `eval_loss > 2.5`, `reward < 0.2 for 100 steps`, `step < 1000 at 2h`. */
export function parseRuleSpec(text: string): RuleSpec {
  const match =
    /^\s*([\w./-]{1,64})\s*(>=|<=|==|!=|>|<)\s*(-?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)\s*(?:(for)\s+(\d+)\s*steps?|(at)\s+(\S+))?\s*$/i.exec(
      text,
    );
  if (match === null) {
    throw new RuleParseError(
      `cannot read the rule "${text.trim()}"; write e.g. \`eval_loss > 2.5\`, \`reward < 0.2 for 100 steps\` or \`step < 1000 at 2h\``,
    );
  }
  const metric = match[1] as string;
  const op = match[2] as RuleOperator;
  const value = Number(match[3]);
  if (!Number.isFinite(value)) throw new RuleParseError(`"${match[3]}" is not a number`);
  const spec: RuleSpec = { metric, op, value, text: `${metric} ${op} ${value}` };
  if (match[4] !== undefined) {
    const steps = Number(match[5]);
    if (!Number.isInteger(steps) || steps <= 0) throw new RuleParseError('`for N steps` needs a positive N');
    spec.forSteps = steps;
    spec.text += ` for ${steps} steps`;
  } else if (match[6] !== undefined) {
    const seconds = parseDuration(match[7] ?? '');
    if (seconds === undefined) throw new RuleParseError(`"${match[7]}" is not a duration like 30m or 2h`);
    spec.atS = seconds;
    spec.text += ` at ${formatDurationShort(seconds)}`;
  }
  return spec;
}

function compare(left: number, op: RuleOperator, right: number): boolean {
  switch (op) {
    case '>':
      return left > right;
    case '>=':
      return left >= right;
    case '<':
      return left < right;
    case '<=':
      return left <= right;
    case '==':
      return left === right;
    case '!=':
      return left !== right;
  }
}

/** Per-rule progress kept in the monitor state. */
export interface RuleProgress {
  /** Step where the condition started holding (for `for N steps`). */
  since?: number;
  /** A time rule was evaluated. */
  checked?: boolean;
}

/**
 * One observation of a metric rule at a point. Returns whether the rule's condition holds (for long
 * enough); the caller feeds that into an episode so it fires once per episode.
 */
export function observeRulePoint(
  rule: AlertRule,
  progress: RuleProgress,
  step: number,
  value: number,
): boolean {
  if (!Number.isFinite(value) || !compare(value, rule.op, rule.value)) {
    delete progress.since;
    return false;
  }
  progress.since ??= step;
  return step - progress.since >= (rule.forSteps ?? 0);
}
