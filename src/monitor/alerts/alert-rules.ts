import type { AlertRule, RuleOperator } from '../policy-checks.js';

/**
 * Alert rules people set from chat: `<metric> <op> <value> [for N steps]` (checked on every logged point;
 * with `for N steps` the condition must hold continuously for N steps) or `<metric> <op> <value> at 2h`
 * (checked once, when the run has been running that long). `step` is a metric too.
 */

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
