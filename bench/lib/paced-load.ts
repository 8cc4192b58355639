/**
 * An open-loop, evenly paced load generator, run as its own process by `runPacedLoad`. Autocannon's
 * `-R` fires each connection's whole per-second budget at the top of every second (a burst), which
 * measures burst queueing rather than ack time; this spreads requests evenly in time instead.
 *
 * `rate` requests/s are spread round-robin over `connections` keep-alive connections (one socket each,
 * all kept open). Latency runs from each request's *scheduled* send time to its last response byte, so a
 * slow server cannot hide queueing by slowing the sender (no coordinated omission).
 * Input: JSON in argv[2] ({url, body, rate, connections, durationS, raw?}); output: one JSON line on stdout.
 */
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';

interface Input {
  url: string;
  body: string;
  rate: number;
  connections: number;
  durationS: number;
  /** Also print every latency (sorted, ms), for a caller that pools several runs. */
  raw?: boolean;
}

const input = JSON.parse(process.argv[2] ?? '{}') as Input;
const target = new URL(input.url);
const agents = Array.from({ length: input.connections }, () => new Agent({ keepAlive: true, maxSockets: 1 }));
const payload = Buffer.from(input.body);
const latencies: number[] = [];
/** How late the generator itself sent each request (its own event loop starved of CPU), ms. */
const sendLags: number[] = [];
/** Worst latency of the requests scheduled in each 100 ms window, to tell a stall from a spread tail. */
const windowMax = new Map<number, number>();
let failed = 0;
let outstanding = 0;

function send(index: number, scheduledAt: number): void {
  outstanding += 1;
  sendLags.push(performance.now() - scheduledAt);
  const finish = (ok: boolean) => {
    outstanding -= 1;
    if (!ok) {
      failed += 1;
      return;
    }
    const latency = performance.now() - scheduledAt;
    latencies.push(latency);
    const window = Math.floor((scheduledAt - startedAt) / 100);
    windowMax.set(window, Math.max(windowMax.get(window) ?? 0, latency));
  };
  const outgoing = request(
    {
      host: target.hostname,
      port: target.port,
      path: target.pathname,
      method: 'POST',
      agent: agents[index % agents.length],
      headers: { 'content-type': 'application/json', 'content-length': payload.length },
    },
    (response) => {
      response.resume();
      response.on('end', () => finish(response.statusCode !== undefined && response.statusCode < 300));
    },
  );
  outgoing.on('error', () => finish(false));
  outgoing.end(payload);
}

const total = Math.round(input.rate * input.durationS);
const intervalMs = 1000 / input.rate;
const startedAt = performance.now();
let next = 0;
await new Promise<void>((resolve) => {
  const tick = () => {
    const now = performance.now();
    while (next < total && startedAt + next * intervalMs <= now) {
      send(next, startedAt + next * intervalMs);
      next += 1;
    }
    if (next >= total) resolve();
    else setTimeout(tick, Math.max(0, Math.min(1, startedAt + next * intervalMs - now)));
  };
  tick();
});
const deadline = performance.now() + 30_000;
while (outstanding > 0 && performance.now() < deadline)
  await new Promise((resolve) => setTimeout(resolve, 10));

latencies.sort((a, b) => a - b);
sendLags.sort((a, b) => a - b);
const quantile = (sorted: number[], fraction: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))] ?? Number.NaN;
const at = (fraction: number) => quantile(latencies, fraction);
const slowWindows = [...windowMax.values()].filter((worst) => worst > 50).length;
process.stdout.write(
  `${JSON.stringify({
    sent: total,
    ok: latencies.length,
    failed: failed + outstanding,
    elapsedS: (performance.now() - startedAt) / 1000,
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    max: latencies[latencies.length - 1] ?? Number.NaN,
    sendLagP99: quantile(sendLags, 0.99),
    sendLagMax: sendLags[sendLags.length - 1] ?? Number.NaN,
    windows: windowMax.size,
    slowWindows,
    ...(input.raw === true
      ? { latencies: latencies.map((latency) => Math.round(latency * 1000) / 1000) }
      : {}),
  })}\n`,
);
for (const agent of agents) agent.destroy();
