import { join } from 'node:path';
import { z } from 'zod';
import { type ChatUser, decodeThreadId } from '../bot/chat-adapter.js';
import { nameRefusal } from '../bot/web/reserved-names.js';
import type { WebEventHub } from '../bot/web/web-events.js';
import { decodePathPart, readJsonBody, sendJson, type WebRoute, WebRouteError } from '../bot/web/web-json.js';
import { definedOnly } from '../defined-only.js';
import { BotError, RunError, ToolPolicyError } from '../errors.js';
import type { Logger } from '../logger.js';
import { parseMetricLine, readLastMetrics, tailLines } from '../runs/file-tail.js';
import { RUN_FILES } from '../runs/records/run-files.js';
import { type RunMeta, runActionsFor } from '../runs/records/run-types.js';
import { readTrackerLinks, trackerLinkLines } from '../runs/tracker-links.js';

/*
 * The playground's runs API: the runs panel, a run's page (metrics, log tail, checkpoints) and its
 * pause / resume / stop buttons. Changes go through the same run operations as chat commands, so the
 * same people may make them.
 */

type WebRunChange = 'pause' | 'resume' | 'stop';

/** What the runs API needs from the core (wired in app.ts). */
export interface WebRunsSource {
  listRuns(): Promise<RunMeta[]>;
  findRun(reference: string): Promise<RunMeta>;
  runDir(runId: string): string;
  /** The chat operation (`pause` / `resume` / `stop`), as if typed by `actor` in `threadId`; a sentence back. */
  change(change: WebRunChange, runId: string, actor: ChatUser, threadId: string): Promise<string>;
}

const SPARKLINE_POINTS = 30;
const DEFAULT_METRIC_POINTS = 2000;
const MAX_METRIC_POINTS = 20_000;
const DEFAULT_LOG_LINES = 200;
const MAX_LOG_LINES = 2000;
const LIVE_POLL_MS = 1500;

const actionBody = z.object({
  action: z.enum(['pause', 'resume', 'stop']),
  user: z
    .string()
    .trim()
    .min(1)
    .max(80)
    .regex(/^[^\p{Cc}:]+$/u, 'no control characters or ":"'),
});

/** JSON has no NaN: non-finite values travel as the strings "NaN", "Infinity", "-Infinity". */
type MetricValue = number | 'NaN' | 'Infinity' | '-Infinity';

function jsonValue(value: number): MetricValue {
  if (Number.isFinite(value)) return value;
  if (Number.isNaN(value)) return 'NaN';
  return value > 0 ? 'Infinity' : '-Infinity';
}

function lossName(names: Iterable<string>): string | undefined {
  const list = [...names];
  return list.find((name) => name === 'loss') ?? list.find((name) => /loss/i.test(name));
}

/** The playground location of a run's thread (`#channel/root`), when it is a playground thread. */
function threadLink(threadId: string): { threadId: string; href?: string } {
  try {
    const decoded = decodeThreadId(threadId);
    if (decoded.platform === 'web' && decoded.thread !== undefined) {
      return {
        threadId,
        href: `#${encodeURIComponent(decoded.channel)}/${encodeURIComponent(decoded.thread)}`,
      };
    }
  } catch {
    // not an encoded thread id: shown as text
  }
  return { threadId };
}

function summary(meta: RunMeta) {
  return {
    id: meta.id,
    name: meta.name,
    status: meta.status,
    ...definedOnly({ statusReason: meta.statusReason }),
    gpus: meta.gpus,
    gpuIndices: meta.gpuIndices,
    ...definedOnly({ step: meta.lastStep }),
    requester: meta.requester.name,
    thread: threadLink(meta.threadId),
    actions: runActionsFor(meta.status),
    createdAt: meta.createdAt,
    updatedAt: meta.updatedAt,
  };
}

function boundedInteger(raw: string | null, fallback: number, max: number): number {
  const value = raw === null ? fallback : Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new WebRouteError(400, 'limit: a positive integer');
  return Math.min(value, max);
}

interface WebRunsRoutes {
  name: 'runs';
  route: WebRoute;
  /** Starts telling SSE clients about run changes (status, step, loss) while any page is open. */
  start(events: WebEventHub): void;
  stop(): void;
}

export function createWebRunsRoutes(options: {
  source: WebRunsSource;
  logger: Logger;
  /** Names a person may not click under (the bot's own, lookalikes); see reserved-names.ts. */
  botName: string;
}): WebRunsRoutes {
  const { source, logger } = options;
  let timer: NodeJS.Timeout | undefined;
  let lastFingerprint = '';

  async function runRow(meta: RunMeta) {
    const records = await readLastMetrics(join(source.runDir(meta.id), RUN_FILES.metrics), SPARKLINE_POINTS);
    const names = new Set(records.flatMap((record) => Object.keys(record.values)));
    const metric = lossName(names);
    const step = records.at(-1)?.step ?? meta.lastStep;
    return {
      ...summary(meta),
      ...definedOnly({ step }),
      ...(metric === undefined
        ? {}
        : {
            lossMetric: metric,
            loss: records
              .map((record) => record.values[metric])
              .filter((value) => value !== undefined)
              .map(jsonValue),
          }),
    };
  }

  async function listRows() {
    const runs = await source.listRuns();
    runs.sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    return Promise.all(runs.map(runRow));
  }

  async function metrics(meta: RunMeta, url: URL) {
    const limit = boundedInteger(url.searchParams.get('limit'), DEFAULT_METRIC_POINTS, MAX_METRIC_POINTS);
    const wanted = url.searchParams.get('names')?.split(',').filter(Boolean);
    const lines = await tailLines(join(source.runDir(meta.id), RUN_FILES.metrics), limit, 16 * 1024 * 1024);
    const names = new Set<string>();
    const points: Array<{ step?: number; ts?: number; values: Record<string, MetricValue> }> = [];
    for (const line of lines) {
      const record = parseMetricLine(line);
      if (record === undefined) continue;
      const values: Record<string, MetricValue> = {};
      for (const [name, value] of Object.entries(record.values)) {
        names.add(name);
        if (wanted === undefined || wanted.includes(name)) values[name] = jsonValue(value);
      }
      points.push({
        ...definedOnly({ step: record.step, ts: record.ts }),
        values,
      });
    }
    return { run: meta.id, names: [...names].sort(), points };
  }

  async function checkpoints(meta: RunMeta) {
    const lines = await tailLines(join(source.runDir(meta.id), 'checkpoints.jsonl'), 50, 256 * 1024);
    return lines.flatMap((line) => {
      try {
        const entry = JSON.parse(line) as { step?: unknown; checkpoint?: unknown; ts?: unknown };
        if (typeof entry.step !== 'number') return [];
        return [
          {
            step: entry.step,
            checkpoint: typeof entry.checkpoint === 'string' ? entry.checkpoint : null,
            ...(typeof entry.ts === 'number' ? { ts: entry.ts } : {}),
          },
        ];
      } catch {
        return [];
      }
    });
  }

  async function findRun(reference: string): Promise<RunMeta> {
    try {
      return await source.findRun(reference);
    } catch (error) {
      if (error instanceof RunError && error.code === 'run_not_found')
        throw new WebRouteError(404, error.message);
      throw error;
    }
  }

  async function change(meta: RunMeta, body: z.infer<typeof actionBody>) {
    const actor: ChatUser = { id: body.user, name: body.user };
    // A click counts as typed in the run's thread when that is a playground thread; a run from Slack or
    // Discord is changed from the playground only by those allowed outside its thread (approvers).
    const link = threadLink(meta.threadId);
    const threadId = link.href === undefined ? `web:runs:${meta.id}` : meta.threadId;
    try {
      return await source.change(body.action, meta.id, actor, threadId);
    } catch (error) {
      if (error instanceof ToolPolicyError) throw new WebRouteError(403, error.message);
      if (error instanceof BotError) throw new WebRouteError(409, error.message);
      throw error;
    }
  }

  async function handle(
    request: Parameters<WebRoute>[0],
    response: Parameters<WebRoute>[1],
    method: string,
    path: string,
  ): Promise<boolean> {
    if (!path.startsWith('/api/runs')) return false;
    const url = new URL(request.url ?? '/', 'http://playground');
    if (method === 'GET' && path === '/api/runs') {
      sendJson(response, 200, { runs: await listRows() });
      return true;
    }
    const match = /^\/api\/runs\/([^/]+)(?:\/(metrics|log|actions))?$/.exec(path);
    if (match?.[1] === undefined) return false;
    const meta = await findRun(decodePathPart(match[1], 'run'));
    const part = match[2];
    if (method === 'GET' && part === undefined) {
      const trackers = trackerLinkLines(await readTrackerLinks(source.runDir(meta.id)));
      sendJson(response, 200, {
        run: { ...(await runRow(meta)), checkpoints: await checkpoints(meta), trackers },
      });
    } else if (method === 'GET' && part === 'metrics') {
      sendJson(response, 200, await metrics(meta, url));
    } else if (method === 'GET' && part === 'log') {
      const count = boundedInteger(url.searchParams.get('lines'), DEFAULT_LOG_LINES, MAX_LOG_LINES);
      const lines = await tailLines(join(source.runDir(meta.id), RUN_FILES.output), count, 1024 * 1024);
      sendJson(response, 200, { run: meta.id, lines });
    } else if (method === 'POST' && part === 'actions') {
      const body = await readJsonBody(request, actionBody);
      const refused = nameRefusal(body.user, options.botName);
      if (refused !== undefined) throw new WebRouteError(400, `user: ${refused}`);
      const message = await change(meta, body);
      sendJson(response, 200, { message });
      void poll();
    } else {
      return false;
    }
    return true;
  }

  let hub: WebEventHub | undefined;
  async function poll(): Promise<void> {
    if (hub === undefined || hub.clientCount === 0) return;
    try {
      const rows = await listRows();
      const fingerprint = JSON.stringify(rows.map((row) => [row.id, row.status, row.step, row.loss?.at(-1)]));
      if (fingerprint === lastFingerprint) return;
      lastFingerprint = fingerprint;
      hub.publish({ kind: 'runs' });
    } catch (error) {
      logger.warn({ err: error }, 'playground runs poll failed');
    }
  }

  return {
    name: 'runs',
    route: async (request, response, method, path) => {
      try {
        return await handle(request, response, method, path);
      } catch (error) {
        if (error instanceof WebRouteError) {
          sendJson(response, error.status, { error: error.message });
          return true;
        }
        throw error;
      }
    },
    start(events) {
      hub = events;
      timer = setInterval(() => void poll(), LIVE_POLL_MS);
      timer.unref();
    },
    stop() {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
      hub = undefined;
    },
  };
}
