import { createServer, type RequestListener, type Server } from 'node:http';
import { Queue, type Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { ChatAdapter } from '../bot/chat-adapter.js';
import type { Config } from '../config/config.js';
import type { Logger } from '../logger.js';
import { QUEUE_NAMES } from '../queue/jobs.js';
import type { GpuAllocator } from '../runs/gpu-allocator.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { createAdminBoard } from './admin-board.js';
import { observeWorker } from './observe-workers.js';
import { createOpsListener, OPS_PATHS } from './ops-http.js';
import { createOpsMetrics, type OpsMetrics } from './ops-metrics.js';
import { createReadiness, type Readiness, redisCheck, workerCheck } from './readiness.js';

// No 'paused': bullmq 6 dropped that job state; a paused queue's jobs are counted as waiting.
const JOB_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'failed', 'completed'] as const;

export interface Ops {
  metrics: OpsMetrics;
  readiness: Readiness;
  listener: RequestListener;
  /** Mounts for the playground's server (roles `bot` and `all`). */
  mounts: Array<{ pathPrefix: string; listener: RequestListener }>;
  watchAdapters(adapters: Iterable<ChatAdapter>): void;
  watchWorkers(workers: Iterable<Worker>): void;
  /** Run and GPU gauges, read from Redis at scrape time. */
  watchRuns(sources: { listRuns(): Promise<RunMeta[]>; allocator: GpuAllocator }): void;
  /** A worker-only process has no playground: it serves only the ops paths on `SHEPHERD_PORT`. */
  listenAlone(): Promise<{ port: number }>;
  /** The port `listenAlone` bound (0 before). */
  port(): number;
  stop(): Promise<void>;
}

export function createOps(options: { config: Config; redis: Redis; logger: Logger }): Ops {
  const { config, redis } = options;
  const metrics = createOpsMetrics();
  const readiness = createReadiness();
  readiness.add(redisCheck(redis));
  const queues = Object.values(QUEUE_NAMES).map((name) => {
    const queue = new Queue(name, { connection: redis, prefix: config.queuePrefix });
    // Connection trouble is reported by /readyz; an unhandled 'error' would end the process.
    queue.on('error', (error) => options.logger.debug({ queue: name, err: error }, 'ops queue error'));
    return queue;
  });
  metrics.setStateSources({
    async queueJobs() {
      const rows = await Promise.all(
        queues.map(async (queue) => [queue.name, await queue.getJobCounts(...JOB_STATES)] as const),
      );
      return Object.fromEntries(rows);
    },
  });
  const listener = createOpsListener({
    readiness,
    metrics,
    metricsToken: config.ops.metricsToken,
    adminToken: config.ops.adminToken,
    adminBoard: config.ops.adminToken === undefined ? undefined : () => createAdminBoard(queues),
    hosts: { host: config.host, allowedHosts: config.playground.allowedHosts },
  });
  const requestListener: RequestListener = (request, response) => {
    listener(request, response).catch((error: unknown) => {
      options.logger.error({ err: error, url: request.url }, 'ops request failed');
      if (!response.headersSent) response.writeHead(500, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: 'internal error' }));
    });
  };
  let server: Server | undefined;
  let boundPort = 0;

  return {
    metrics,
    readiness,
    listener: requestListener,
    mounts: OPS_PATHS.map((path) => ({ pathPrefix: path, listener: requestListener })),
    watchAdapters(adapters) {
      for (const adapter of adapters) {
        const connected = adapter.isConnected?.bind(adapter);
        if (connected === undefined) continue;
        readiness.add({
          name: `adapter:${adapter.platform}`,
          run: () => (connected() ? { ok: true } : { ok: false, detail: 'not connected' }),
        });
      }
    },
    watchWorkers(workers) {
      for (const worker of workers) {
        observeWorker(worker, metrics);
        readiness.add(workerCheck(worker));
      }
    },
    watchRuns(sources) {
      metrics.setStateSources({
        async runs() {
          const counts: Record<string, number> = {};
          for (const run of await sources.listRuns()) counts[run.status] = (counts[run.status] ?? 0) + 1;
          return counts;
        },
        async gpus() {
          const held = await sources.allocator.owners();
          const total = sources.allocator.inventory.length;
          return { busy: held.size, free: Math.max(0, total - held.size) };
        },
      });
    },
    async listenAlone() {
      const created = createServer(requestListener);
      await new Promise<void>((resolve, reject) => {
        created.once('error', reject);
        created.listen(config.port, config.host, () => resolve());
      });
      server = created;
      const address = created.address();
      boundPort = typeof address === 'object' && address !== null ? address.port : config.port;
      return { port: boundPort };
    },
    port() {
      return boundPort;
    },
    async stop() {
      metrics.stop();
      if (server !== undefined) {
        const closing = server;
        server = undefined;
        await new Promise<void>((resolve) => {
          closing.close(() => resolve());
          closing.closeAllConnections();
        });
      }
      await Promise.all(queues.map((queue) => queue.close()));
    },
  };
}
