import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alertsOf, type CurveEntry, loadManifest, replayCurve } from '../../bench/lib/curve-replay.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

/*
 * The alert-quality corpus (test/fixtures/curves, written by its seeded generate.py) through the real
 * monitor on real Redis, one 30 s tick at a time on a simulated clock. On the main branch before the
 * plateau rework the healthy curves drew 1 to 28 plateau alerts each (power-law 14, cosine 3, small-batch
 * noise 4, eval-every-N 28) and the noisy RL curve a divergence warning.
 */

const prefix = uniquePrefix('aq');
let redis: Redis;
let root: string;
let manifest: CurveEntry[];

beforeAll(async () => {
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  root = await mkdtemp(join(tmpdir(), 'shepherd-alert-quality-'));
  manifest = await loadManifest();
});

afterAll(async () => {
  redis.disconnect();
  await deleteKeysWithPrefix(prefix);
  await rm(root, { recursive: true, force: true });
});

describe('alert quality corpus', () => {
  it('holds at least eight healthy curves and eight incidents', () => {
    expect(manifest.filter((entry) => entry.healthy).length).toBeGreaterThanOrEqual(8);
    expect(new Set(manifest.filter((entry) => !entry.healthy).map((entry) => entry.expect))).toEqual(
      new Set(['nan', 'spike', 'divergence', 'plateau', 'overfitting', 'throughput', 'stall', 'grad_norm']),
    );
  });

  it('healthy curves stay quiet: no warning or critical, at most one info note', {
    timeout: 120_000,
  }, async () => {
    const report: Record<string, string[]> = {};
    for (const entry of manifest.filter((item) => item.healthy)) {
      const result = await replayCurve(entry, { redis, prefix, root });
      report[entry.name] = alertsOf(result).map((incident) => `${incident.severity}:${incident.kind}`);
    }
    for (const [name, alerts] of Object.entries(report)) {
      expect({ name, loud: alerts.filter((alert) => !alert.startsWith('info:')) }).toEqual({
        name,
        loud: [],
      });
      expect({ name, infos: alerts.length <= 1 }).toEqual({ name, infos: true });
    }
  });

  it('every incident is detected within two ticks of its first sign', { timeout: 120_000 }, async () => {
    for (const entry of manifest.filter((item) => !item.healthy)) {
      const result = await replayCurve(entry, { redis, prefix, root, stopWhenDetected: true });
      const hit = result.incidents.find((item) => item.incident.kind === entry.expect);
      expect({ name: entry.name, detected: hit !== undefined }).toEqual({ name: entry.name, detected: true });
      const latency = (hit?.tick ?? Number.POSITIVE_INFINITY) - (result.firstSignTick ?? 0);
      expect({ name: entry.name, latency: latency <= 2 }).toEqual({ name: entry.name, latency: true });
    }
  });

  it('a grad-norm explosion is flagged before the NaN it leads to', { timeout: 60_000 }, async () => {
    const entry = manifest.find((item) => item.expect === 'grad_norm') as CurveEntry;
    const result = await replayCurve(entry, { redis, prefix, root });
    const gradTick = result.incidents.find((item) => item.incident.kind === 'grad_norm')?.tick;
    const nanTick = result.incidents.find((item) => item.incident.kind === 'nan')?.tick;
    expect(gradTick).toBeDefined();
    expect(nanTick).toBeDefined();
    expect(gradTick as number).toBeLessThan(nanTick as number);
  });
});

describe('plateau', () => {
  it('says at most one info note on a 20,000-step healthy curve even without max_steps', {
    timeout: 60_000,
  }, async () => {
    for (const name of ['healthy_powerlaw_pretrain', 'healthy_eval_every_n', 'healthy_smallbatch_noise']) {
      const entry = manifest.find((item) => item.name === name) as CurveEntry;
      const result = await replayCurve(entry, { redis, prefix, root });
      const plateaus = alertsOf(result).filter((incident) => incident.kind === 'plateau');
      expect(plateaus.length).toBeLessThanOrEqual(1);
      for (const plateau of plateaus) expect(plateau.severity).toBe('info');
    }
    // Even a flat curve that would trip the detector on every tick speaks once.
    const flat = manifest.find((item) => item.expect === 'plateau') as CurveEntry;
    const all = await replayCurve(flat, { redis, prefix, root });
    expect(all.incidents.filter((item) => item.incident.kind === 'plateau')).toHaveLength(1);
  });

  it('catches an early plateau at a too-low learning rate, as an info note with a suggestion', {
    timeout: 60_000,
  }, async () => {
    const entry = manifest.find((item) => item.expect === 'plateau') as CurveEntry;
    const result = await replayCurve(entry, { redis, prefix, root, stopWhenDetected: true });
    const plateau = result.incidents.find((item) => item.incident.kind === 'plateau')?.incident;
    expect(plateau?.severity).toBe('info');
    expect(plateau?.summary).toMatch(/learning rate/);
    expect(plateau?.step ?? 0).toBeLessThan(2500);
  });

  it('stays silent near the planned end when max_steps is known', { timeout: 60_000 }, async () => {
    const entry = manifest.find((item) => item.expect === 'plateau') as CurveEntry;
    // The same flat curve, but the run said it would stop at 2,300 steps: the flat part is its end.
    const result = await replayCurve({ ...entry, config: { max_steps: 2300 } }, { redis, prefix, root });
    const plateau = result.incidents.find((item) => item.incident.kind === 'plateau');
    expect(plateau).toBeUndefined();
  });
});
