/**
 * Alert quality over the corpus in test/fixtures/curves (8+ healthy curves, 8+ incidents; regenerate with
 * `python3 test/fixtures/curves/generate.py`), each replayed through the real monitor on real Redis, one
 * 30 s tick at a time on a simulated clock. Prints:
 *  false_alerts_per_healthy_run — alerts on healthy runs (the end-of-run summary excluded), per run;
 *    goal 0 warnings or criticals and at most 1 info note per run (`false_warnings_per_healthy_run`,
 *    `false_infos_per_healthy_run` and `max_infos_on_a_healthy_run` split it);
 *  incidents_detected — "<detected in time>/<incidents>": the expected alert within 2 ticks of the
 *    incident's first sign; goal all of them (`incident_detection_ticks_max` is the slowest);
 *  one `alert_quality_<curve>=…` line per curve with what it raised.
 * A detector change that worsens either headline figure is a regression.
 * Run: npx tsx bench/alert-quality.ts  (needs Redis at REDIS_URL or 127.0.0.1:6379)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { alertsOf, loadManifest, replayCurve } from './lib/curve-replay.js';
import { note, print } from './lib/output.js';
import { benchRedisUrl, deleteKeysWithPrefix } from './lib/redis-keys.js';

const redis = new Redis(benchRedisUrl, { maxRetriesPerRequest: null });
const prefix = `bench-alert-quality-${process.pid}`;
const root = await mkdtemp(join(tmpdir(), 'shepherd-bench-alert-quality-'));

try {
  const manifest = await loadManifest();
  const healthy = manifest.filter((entry) => entry.healthy);
  const incidents = manifest.filter((entry) => !entry.healthy);
  let warnings = 0;
  let infos = 0;
  let maxInfos = 0;
  for (const entry of healthy) {
    const result = await replayCurve(entry, { redis, prefix, root });
    const alerts = alertsOf(result);
    const runInfos = alerts.filter((incident) => incident.severity === 'info').length;
    warnings += alerts.length - runInfos;
    infos += runInfos;
    maxInfos = Math.max(maxInfos, runInfos);
    print(
      `alert_quality_${entry.name}`,
      alerts.map((incident) => `${incident.severity}:${incident.kind}`).join(',') || 'quiet',
    );
    note(`${entry.name}: ${result.ticks} ticks, ${alerts.length} alerts`);
  }
  let detected = 0;
  let slowest = 0;
  for (const entry of incidents) {
    const result = await replayCurve(entry, { redis, prefix, root, stopWhenDetected: true });
    const hit = result.incidents.find((item) => item.incident.kind === entry.expect);
    const latency = hit === undefined ? Number.POSITIVE_INFINITY : hit.tick - (result.firstSignTick ?? 0);
    if (latency <= 2) detected++;
    slowest = Math.max(slowest, latency);
    print(
      `alert_quality_${entry.name}`,
      hit === undefined ? `missed_${entry.expect}` : `${entry.expect}_after_${latency}_ticks`,
    );
  }
  print('false_alerts_per_healthy_run', (warnings + infos) / healthy.length);
  print('false_warnings_per_healthy_run', warnings / healthy.length);
  print('false_infos_per_healthy_run', infos / healthy.length);
  print('max_infos_on_a_healthy_run', maxInfos);
  print('incidents_detected', `${detected}/${incidents.length}`);
  print('incident_detection_ticks_max', Number.isFinite(slowest) ? slowest : 'missed');
} finally {
  redis.disconnect();
  await deleteKeysWithPrefix(prefix).catch(() => undefined);
  await rm(root, { recursive: true, force: true });
}
