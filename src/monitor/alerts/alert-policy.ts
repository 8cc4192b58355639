import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { parseJsonWith } from '../../text/json.js';
import {
  type AlertPolicy,
  type AlertRule,
  alertRuleSchema,
  MUTABLE_DETECTORS,
  type MutableDetector,
  type Mute,
  muteSchema,
} from '../policy-checks.js';
import type { RuleSpec } from './alert-rules.js';

/**
 * Per-run alert rules and detector mutes, stored in Redis next to the run's monitor state
 * (`<prefix>:alert-rules:<runId>`, `<prefix>:alert-mutes:<runId>`) so they survive restarts. Every mute and
 * unmute is appended to the run's audit trail (`<prefix>:alert-audit:<runId>`, capped) with who and when.
 */

/** A line of a run's mute/unmute audit trail. */
const auditLine = z.record(z.string(), z.unknown());

export const MAX_RULES_PER_RUN = 20;

/** `grad-norm`, `GradNorm`, `idle-gpus`… → the detector's name, or undefined. */
export function normaliseDetector(text: string): MutableDetector | undefined {
  const name = text
    .trim()
    .toLowerCase()
    .replace(/[-\s]/g, '_')
    .replace(/^idle_gpus$/, 'idle_gpu')
    .replace(/^gradnorm$/, 'grad_norm')
    .replace(/^rules$/, 'rule')
    .replace(/^(?:script|script_alerts|alerts)$/, 'script_alert')
    .replace(/^overfit$/, 'overfitting');
  return (MUTABLE_DETECTORS as readonly string[]).includes(name) ? (name as MutableDetector) : undefined;
}

export function createAlertPolicyStore(options: { redis: Redis; prefix: string; clock?: () => number }) {
  const { redis, prefix } = options;
  const clock = options.clock ?? Date.now;
  const rulesKey = (runId: string) => `${prefix}:alert-rules:${runId}`;
  const mutesKey = (runId: string) => `${prefix}:alert-mutes:${runId}`;
  const auditKey = (runId: string) => `${prefix}:alert-audit:${runId}`;

  /** A corrupt entry is skipped rather than disabling every other rule. */
  function parseAll<Schema extends z.ZodType>(
    schema: Schema,
    raw: Record<string, string>,
  ): z.output<Schema>[] {
    return Object.values(raw).flatMap((value) => {
      const item = parseJsonWith(schema, value);
      return item === undefined ? [] : [item];
    });
  }

  async function load(runId: string): Promise<AlertPolicy> {
    const [rules, mutes] = await Promise.all([
      redis.hgetall(rulesKey(runId)),
      redis.hgetall(mutesKey(runId)),
    ]);
    return {
      rules: parseAll(alertRuleSchema, rules).sort((a, b) => a.createdAt.localeCompare(b.createdAt)),
      mutes: parseAll(muteSchema, mutes).filter((mute) => mute.until === undefined || mute.until > clock()),
    };
  }

  return {
    load,
    async addRule(runId: string, spec: RuleSpec, by: { id: string; name: string }): Promise<AlertRule> {
      const count = await redis.hlen(rulesKey(runId));
      if (count >= MAX_RULES_PER_RUN) throw new Error(`a run can have at most ${MAX_RULES_PER_RUN} rules`);
      const rule: AlertRule = {
        ...spec,
        id: `ru_${randomBytes(3).toString('hex')}`,
        createdBy: by,
        createdAt: new Date(clock()).toISOString(),
      };
      await redis.hset(rulesKey(runId), rule.id, JSON.stringify(rule));
      return rule;
    },
    async removeRule(runId: string, ruleId: string): Promise<boolean> {
      return (await redis.hdel(rulesKey(runId), ruleId)) > 0;
    },
    async mute(
      runId: string,
      detector: MutableDetector,
      by: { id: string; name: string },
      forS?: number,
    ): Promise<Mute> {
      const at = new Date(clock()).toISOString();
      const mute: Mute = {
        detector,
        by,
        at,
        ...(forS === undefined ? {} : { until: clock() + forS * 1000 }),
      };
      await redis
        .multi()
        .hset(mutesKey(runId), detector, JSON.stringify(mute))
        .rpush(
          auditKey(runId),
          JSON.stringify({ action: 'mute', detector, by, at, until: mute.until ?? null }),
        )
        .ltrim(auditKey(runId), -200, -1)
        .exec();
      return mute;
    },
    async unmute(
      runId: string,
      detector: MutableDetector,
      by: { id: string; name: string },
    ): Promise<boolean> {
      const at = new Date(clock()).toISOString();
      const results = await redis
        .multi()
        .hdel(mutesKey(runId), detector)
        .rpush(auditKey(runId), JSON.stringify({ action: 'unmute', detector, by, at }))
        .ltrim(auditKey(runId), -200, -1)
        .exec();
      return Number(results?.[0]?.[1] ?? 0) > 0;
    },
    /**
     * After a run's last tick: its rules, mutes and their audit trail go at once (`keepMs` 0, a run that
     * cannot come back) or expire after `keepMs` (a paused or failed run); `load` is unaffected meanwhile.
     */
    async retire(runId: string, keepMs: number): Promise<void> {
      const keys = [rulesKey(runId), mutesKey(runId), auditKey(runId)];
      if (keepMs <= 0) {
        await redis.del(...keys);
        return;
      }
      const multi = redis.multi();
      for (const key of keys) multi.pexpire(key, Math.round(keepMs));
      await multi.exec();
    },
    /** Rules added to a run that ticks again (resumed) stay for as long as it is watched. */
    async keep(runId: string): Promise<void> {
      await redis.multi().persist(rulesKey(runId)).persist(mutesKey(runId)).persist(auditKey(runId)).exec();
    },
    /** The mute/unmute audit trail of a run, oldest first. */
    async audit(runId: string): Promise<Array<Record<string, unknown>>> {
      return (await redis.lrange(auditKey(runId), 0, -1)).flatMap((line) => {
        const entry = parseJsonWith(auditLine, line);
        return entry === undefined ? [] : [entry];
      });
    },
  };
}

export type AlertPolicyStore = ReturnType<typeof createAlertPolicyStore>;
