/**
 * Event-loop delay and GC of a server under load, read from outside: Shepherd's Prometheus `/metrics`
 * (`shepherd_event_loop_lag_seconds` is the p99 since the previous scrape; prom-client's default
 * `nodejs_gc_duration_seconds` histogram counts every GC by kind), and the bare server's `/loop-delay`.
 */

/** One scrape: series (name plus labels, as printed) → value. */
export type Scrape = Map<string, number>;

export async function scrapeMetrics(baseUrl: string): Promise<Scrape> {
  const response = await fetch(`${baseUrl}/metrics`);
  if (!response.ok) throw new Error(`GET /metrics answered ${response.status}`);
  const series: Scrape = new Map();
  for (const line of (await response.text()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    series.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return series;
}

export interface GcSummary {
  /** kind → {count, total ms, pauses of 10 ms or more} during the window. */
  byKind: Record<string, { count: number; totalMs: number; over10ms: number }>;
}

/** GC between two scrapes of the same process. */
export function gcBetween(before: Scrape, after: Scrape): GcSummary {
  const byKind: GcSummary['byKind'] = {};
  const delta = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
  for (const name of after.keys()) {
    const match = /^nodejs_gc_duration_seconds_count\{kind="([^"]+)"\}$/.exec(name);
    if (match?.[1] === undefined) continue;
    const kind = match[1];
    const count = delta(name);
    if (count === 0) continue;
    const under10ms = delta(`nodejs_gc_duration_seconds_bucket{le="0.01",kind="${kind}"}`);
    byKind[kind] = {
      count,
      totalMs: delta(`nodejs_gc_duration_seconds_sum{kind="${kind}"}`) * 1000,
      over10ms: count - under10ms,
    };
  }
  return { byKind };
}

export function formatGc(summary: GcSummary): string {
  const parts = Object.entries(summary.byKind).map(
    ([kind, { count, totalMs, over10ms }]) =>
      `${kind} ${count}× ${totalMs.toFixed(0)} ms (${over10ms} ≥ 10 ms)`,
  );
  return parts.length === 0 ? 'no GC' : parts.join(', ');
}

/** The bare server's event-loop delay p99 (ms) since its previous `/loop-delay` call. */
export async function bareLoopDelayP99Ms(baseUrl: string): Promise<number> {
  const response = await fetch(`${baseUrl}/loop-delay`);
  const body = (await response.json()) as { p99Ms: number };
  return body.p99Ms;
}
