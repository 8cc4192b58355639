import { z } from 'zod';

/**
 * What a tick checks of a run's policy (people's rules and mutes): the stored shapes and the pure checks.
 * The detector side needs only these; storing and changing rules and mutes is the alerts' business
 * (alerts/alert-policy.ts, alerts/alert-rules.ts), which imports this file and is never imported back.
 */

const RULE_OPERATORS = ['>', '>=', '<', '<=', '==', '!='] as const;
export type RuleOperator = (typeof RULE_OPERATORS)[number];

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

export const MUTABLE_DETECTORS = [
  'crash',
  'nan',
  'spike',
  'divergence',
  'plateau',
  'stall',
  'overfitting',
  'throughput',
  'grad_norm',
  'idle_gpu',
  'rule',
  'script_alert',
] as const;
export type MutableDetector = (typeof MUTABLE_DETECTORS)[number];

/** A detector muted on a run, as stored. */
export const muteSchema = z.object({
  detector: z.enum(MUTABLE_DETECTORS),
  /** Epoch ms; absent = until unmuted. */
  until: z.number().optional(),
  by: person,
  at: z.string(),
});
export type Mute = z.output<typeof muteSchema>;

/** People's rules and mutes of a run, as a tick is given them. */
export interface AlertPolicy {
  rules: AlertRule[];
  mutes: Mute[];
}

export function isMuted(policy: AlertPolicy | undefined, kind: string, now: number): boolean {
  return (
    policy?.mutes.some((mute) => mute.detector === kind && (mute.until === undefined || mute.until > now)) ??
    false
  );
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
