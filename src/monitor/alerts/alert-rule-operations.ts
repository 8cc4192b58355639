import type { ChatUser } from '../../bot/chat-adapter.js';
import { ToolPolicyError } from '../../errors.js';
import type { RunMeta } from '../../runs/records/run-types.js';
import { MUTABLE_DETECTORS, type Mute } from '../policy-checks.js';
import { type AlertPolicyStore, MAX_RULES_PER_RUN, normaliseDetector } from './alert-policy.js';
import { formatDurationShort, parseDuration, parseRuleSpec, RuleParseError } from './alert-rules.js';

/**
 * What `alert`, `alerts`, `mute` and `unmute` (and the agent's add_alert_rule / mute_alert tools) do:
 * resolve the run, validate, store, and answer with one sentence for the thread.
 */

/** A rule or mute people asked for cannot be applied; the message is for the thread. */
class AlertRuleError extends ToolPolicyError {
  constructor(
    code: 'invalid_rule' | 'unknown_detector' | 'too_many_rules' | 'unknown_rule',
    message: string,
  ) {
    super(code, message);
    this.name = 'AlertRuleError';
  }
}

export function createAlertRuleOperations(options: {
  store: AlertPolicyStore;
  findRun: (reference: string) => Promise<RunMeta>;
  clock?: () => number;
}) {
  const { store } = options;
  const clock = options.clock ?? Date.now;

  function detectorOf(text: string) {
    const detector = normaliseDetector(text);
    if (detector === undefined) {
      throw new AlertRuleError(
        'unknown_detector',
        `there is no detector "${text}"; detectors: ${MUTABLE_DETECTORS.join(', ')}`,
      );
    }
    return detector;
  }

  function describeMute(mute: Mute): string {
    const until =
      mute.until === undefined
        ? 'until unmuted'
        : `until ${new Date(mute.until).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
    return `${mute.detector} (${until}, by ${mute.by.name})`;
  }

  return {
    async addRule(reference: string, ruleText: string, actor: ChatUser): Promise<string> {
      const meta = await options.findRun(reference);
      let spec: ReturnType<typeof parseRuleSpec>;
      try {
        spec = parseRuleSpec(ruleText);
      } catch (error) {
        if (error instanceof RuleParseError) throw new AlertRuleError('invalid_rule', error.message);
        throw error;
      }
      const existing = await store.load(meta.id);
      if (existing.rules.length >= MAX_RULES_PER_RUN)
        throw new AlertRuleError('too_many_rules', `${meta.name} already has ${MAX_RULES_PER_RUN} rules`);
      const rule = await store.addRule(meta.id, spec, { id: actor.id, name: actor.name });
      const how =
        rule.atS !== undefined
          ? `I will check it once, ${formatDurationShort(rule.atS)} after the run started`
          : 'I will alert once each time it becomes true';
      return `Rule ${rule.id} on ${meta.name}: \`when ${rule.text}\`. ${how}.`;
    },

    async removeRule(reference: string, ruleId: string): Promise<string> {
      const meta = await options.findRun(reference);
      if (!(await store.removeRule(meta.id, ruleId)))
        throw new AlertRuleError('unknown_rule', `${meta.name} has no rule ${ruleId}`);
      return `Removed rule ${ruleId} from ${meta.name}.`;
    },

    async list(reference: string): Promise<string> {
      const meta = await options.findRun(reference);
      const policy = await store.load(meta.id);
      const lines = [`Alerts of ${meta.name}:`];
      if (policy.rules.length === 0)
        lines.push('• no rules (add one with `alert <run> when <metric> <op> <value>`)');
      for (const rule of policy.rules)
        lines.push(`• ${rule.id}: when ${rule.text} (by ${rule.createdBy.name})`);
      lines.push(
        policy.mutes.length === 0
          ? '• no detector muted'
          : `• muted: ${policy.mutes.map(describeMute).join('; ')}`,
      );
      return lines.join('\n');
    },

    async mute(
      reference: string,
      detectorText: string,
      duration: string | undefined,
      actor: ChatUser,
    ): Promise<string> {
      const meta = await options.findRun(reference);
      const detector = detectorOf(detectorText);
      let forS: number | undefined;
      if (duration !== undefined) {
        forS = parseDuration(duration);
        if (forS === undefined)
          throw new AlertRuleError('invalid_rule', `"${duration}" is not a duration like 30m or 2h`);
      }
      const mute = await store.mute(meta.id, detector, { id: actor.id, name: actor.name }, forS);
      return `Muted ${detector} alerts on ${meta.name} ${mute.until === undefined ? 'until someone unmutes them' : `for ${formatDurationShort(forS ?? 0)} (until ${new Date(mute.until).toISOString().slice(11, 16)} UTC)`}. Recorded: ${actor.name} at ${new Date(clock()).toISOString().slice(11, 16)} UTC.`;
    },

    async unmute(reference: string, detectorText: string, actor: ChatUser): Promise<string> {
      const meta = await options.findRun(reference);
      const detector = detectorOf(detectorText);
      const was = await store.unmute(meta.id, detector, { id: actor.id, name: actor.name });
      return was
        ? `Unmuted ${detector} alerts on ${meta.name}.`
        : `${detector} alerts on ${meta.name} were not muted.`;
    },
  };
}

export type AlertRuleOperations = ReturnType<typeof createAlertRuleOperations>;
