import { type IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/*
 * Prometheus series for whoever runs Shepherd. One registry per app (tests build several apps in one
 * process, and prom-client's global registry would refuse the second). Counters move where things
 * happen; gauges that describe state (queues, runs, GPUs) are read from Redis when scraped.
 */

/** Reads current state at scrape time; each sample replaces the gauge's previous values. */
interface StateSources {
  /** queue name → state → count */
  queueJobs?: () => Promise<Record<string, Record<string, number>>>;
  /** run status → count */
  runs?: () => Promise<Record<string, number>>;
  /** GPU state (`busy`, `free`) → count */
  gpus?: () => Promise<Record<string, number>>;
}

export interface OpsMetrics {
  readonly registry: Registry;
  turnFinished(durationSeconds: number, pickupSeconds: number): void;
  llmCall(reason: string): void;
  llmTokens(direction: 'input' | 'output', model: string, tokens: number): void;
  llmError(kind: string): void;
  alert(kind: string): void;
  notify(platform: string, outcome: 'ok' | 'retry' | 'failed'): void;
  approval(decision: string): void;
  /** Adds state readers; later calls add to earlier ones (each process has the ones it can answer). */
  setStateSources(sources: StateSources): void;
  /** The Prometheus text exposition. */
  render(): Promise<{ contentType: string; body: string }>;
  stop(): void;
}

function replaceGauge<L extends string>(gauge: Gauge<L>, rows: Array<[Record<L, string>, number]>): void {
  gauge.reset();
  for (const [labels, value] of rows) gauge.set(labels, value);
}

/** Gauges that describe state (queues, runs, GPUs), read from `sources` when scraped. */
function registerStateGauges(registry: Registry, sources: StateSources): void {
  const queueJobs = new Gauge({
    name: 'shepherd_queue_jobs',
    help: 'Jobs per BullMQ queue and state',
    labelNames: ['queue', 'state'] as const,
    registers: [registry],
    async collect() {
      if (sources.queueJobs === undefined) return;
      const counts = await sources.queueJobs();
      const rows: Array<[Record<'queue' | 'state', string>, number]> = [];
      for (const [queue, states] of Object.entries(counts)) {
        for (const [state, count] of Object.entries(states)) rows.push([{ queue, state }, count]);
      }
      replaceGauge(queueJobs, rows);
    },
  });
  const runs = new Gauge({
    name: 'shepherd_runs',
    help: 'Runs by status',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      if (sources.runs === undefined) return;
      replaceGauge(
        runs,
        Object.entries(await sources.runs()).map(([status, count]) => [{ status }, count]),
      );
    },
  });
  const gpus = new Gauge({
    name: 'shepherd_gpus',
    help: 'GPUs by state (busy, free)',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      if (sources.gpus === undefined) return;
      replaceGauge(
        gpus,
        Object.entries(await sources.gpus()).map(([state, count]) => [{ state }, count]),
      );
    },
  });
}

/** Event-loop delay p99 since the previous scrape; returns the histogram to disable on stop. */
function registerEventLoopLag(registry: Registry): IntervalHistogram {
  // The histogram records whole timer intervals (≥ the resolution); the delay is what exceeds it.
  const loopDelayResolutionMs = 10;
  const loopDelay = monitorEventLoopDelay({ resolution: loopDelayResolutionMs });
  loopDelay.enable();
  new Gauge({
    name: 'shepherd_event_loop_lag_seconds',
    help: 'Event-loop delay p99 since the previous scrape',
    registers: [registry],
    collect() {
      const p99 = loopDelay.percentile(99);
      this.set(Number.isFinite(p99) ? Math.max(0, p99 / 1e6 - loopDelayResolutionMs) / 1e3 : 0);
      loopDelay.reset();
    },
  });
  return loopDelay;
}

/** Counters and histograms that move where things happen. */
function createEventSeries(registry: Registry) {
  const turnDuration = new Histogram({
    name: 'shepherd_turn_duration_seconds',
    help: 'Time an agent turn job took from pick-up to completion',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [registry],
  });
  const turnPickup = new Histogram({
    name: 'shepherd_turn_pickup_seconds',
    help: 'Time from a message being queued to a worker starting its turn',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30],
    registers: [registry],
  });
  const llmCalls = new Counter({
    name: 'shepherd_llm_calls_total',
    help: 'LLM HTTP requests (retries included) by reason',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const llmTokens = new Counter({
    name: 'shepherd_llm_tokens_total',
    help: 'LLM tokens by direction (input, output) and model',
    labelNames: ['direction', 'model'] as const,
    registers: [registry],
  });
  const llmErrors = new Counter({
    name: 'shepherd_llm_errors_total',
    help: 'LLM requests that failed after retries, by kind',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  const alerts = new Counter({
    name: 'shepherd_alerts_total',
    help: 'Alerts posted, by detector kind',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  const notify = new Counter({
    name: 'shepherd_notify_total',
    help: 'Outbound platform calls by platform and outcome (ok, retry, failed)',
    labelNames: ['platform', 'outcome'] as const,
    registers: [registry],
  });
  const approvals = new Counter({
    name: 'shepherd_approvals_total',
    help: 'Approval decisions applied, by decision',
    labelNames: ['decision'] as const,
    registers: [registry],
  });
  return { turnDuration, turnPickup, llmCalls, llmTokens, llmErrors, alerts, notify, approvals };
}

export function createOpsMetrics(options: { defaultMetrics?: boolean } = {}): OpsMetrics {
  const registry = new Registry();
  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  const sources: StateSources = {};
  const loopDelay = registerEventLoopLag(registry);
  registerStateGauges(registry, sources);
  const { turnDuration, turnPickup, llmCalls, llmTokens, llmErrors, alerts, notify, approvals } =
    createEventSeries(registry);

  return {
    registry,
    turnFinished(durationSeconds, pickupSeconds) {
      turnDuration.observe(Math.max(0, durationSeconds));
      turnPickup.observe(Math.max(0, pickupSeconds));
    },
    llmCall: (reason) => llmCalls.inc({ reason }),
    llmTokens: (direction, model, tokens) => {
      if (Number.isFinite(tokens) && tokens > 0) llmTokens.inc({ direction, model }, tokens);
    },
    llmError: (kind) => llmErrors.inc({ kind }),
    alert: (kind) => alerts.inc({ kind }),
    notify: (platform, outcome) => notify.inc({ platform, outcome }),
    approval: (decision) => approvals.inc({ decision }),
    setStateSources(added) {
      Object.assign(sources, added);
    },
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
    stop() {
      loopDelay.disable();
    },
  };
}
