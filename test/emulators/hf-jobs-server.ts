import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { z } from 'zod';
import {
  type EmulatedJob,
  type EmulatedScheduledJob,
  type HubJobStage,
  hardwareFixture,
  whoAmIFixture,
} from './hf-jobs-fixtures.js';

/**
 * A local stand-in for the HF Jobs API (the subset Shepherd calls), over real HTTP, with the paths, bodies and
 * answers of @huggingface/hub 2.17.5's `runJob`, `getJob`, `cancelJob`, `streamJobLogs`, `listJobHardware`,
 * `createScheduledJob`, `listScheduledJobs`, `deleteScheduledJob` and `whoAmI` (`src/lib/jobs/*.ts`).
 *
 * - Every call but the hardware list needs `Authorization: Bearer <token>` (the real API: 401 otherwise).
 * - A job's command runs as a REAL child process (no shell, the image is not pulled: `python3` is this host's),
 *   so log lines come from a real process. Stages go SCHEDULING → RUNNING → COMPLETED / ERROR / CANCELED.
 * - The log is SSE as `streamJobLogs` reads it: `data: {"data": <line>, "timestamp": <ISO>}`, replayed from the
 *   first line on every connection (as the Python client's event-index dedup assumes), `: keep-alive` comments,
 *   and the stream ends when the job has. `dropLogStreams` ends streams early to test reconnects.
 * - Without `timeoutSeconds` a job gets the Hub's default of 30 minutes (hub-docs `jobs-pricing.md`).
 * Assumptions, not known from any source: the wording of ERROR messages ("Job failed with exit code: N",
 * "Job timeout …"), and that cancelling an ended job answers it unchanged.
 */

type LogEvent = { data: string; timestamp: string };
type DropKind = 'end' | 'reset' | 'stall' | 'hang';

interface JobRecord {
  job: EmulatedJob;
  events: LogEvent[];
  listeners: Set<() => void>;
  dir: string;
  /** Secret values go to the process only; the job answer lists their names (`ApiJob.secrets: string[]`). */
  secretValues: Record<string, string>;
  child?: ChildProcess;
  cancelled: boolean;
  timedOut: boolean;
  timers: NodeJS.Timeout[];
  connections: number;
}

interface RecordedRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  body: unknown;
}

export interface HfJobsEmulator {
  url: string;
  token: string;
  namespace: string;
  requests: RecordedRequest[];
  /** A job as the API would answer it. */
  job(jobId: string): EmulatedJob | undefined;
  allJobs(): EmulatedJob[];
  scheduled: ReadonlyMap<string, EmulatedScheduledJob>;
  /** Pid of a job's process while it runs (its process group leader). */
  pidOf(jobId: string): number | undefined;
  /** The lines a job has logged so far (what a full replay would send). */
  logLines(jobId: string): string[];
  /** Log connections opened for a job so far. */
  logConnections(jobId: string): number;
  /**
   * The next `times` log connections stop after `afterEvents` events: `end` cleanly, `reset` the socket, or
   * `stall`: send nothing more (keep-alives only) and end once the job has ended; `hang`: send nothing at all,
   * not even keep-alives, and never end (a dead connection the client must notice by itself).
   */
  dropLogStreams(plan: { afterEvents: number; times?: number; how?: DropKind }): void;
  /** Make `GET /api/jobs/hardware` answer this HTTP status (undefined: answer normally). */
  failHardware(status: number | undefined): void;
  close(): Promise<void>;
}

const FINAL: ReadonlySet<HubJobStage> = new Set(['COMPLETED', 'CANCELED', 'ERROR', 'DELETED']);
const SHORTCUTS = ['@annually', '@yearly', '@monthly', '@weekly', '@daily', '@hourly'];

/** The body `runJob` sends (lib/jobs/run-job.ts builds it from `CreateJobOptions`). */
const jobBodySchema = z.strictObject({
  flavor: z.string(),
  environment: z.record(z.string(), z.string()),
  dockerImage: z.string().optional(),
  spaceId: z.string().optional(),
  command: z.array(z.string()).min(1).optional(),
  arguments: z.array(z.string()).optional(),
  secrets: z.record(z.string(), z.string()).optional(),
  arch: z.enum(['amd64', 'arm64']).optional(),
  timeoutSeconds: z.number().positive().nullable().optional(),
  attempts: z.number().int().positive().optional(),
  labels: z.record(z.string(), z.string()).optional(),
});
/** The body `createScheduledJob` sends (lib/jobs/create-scheduled-job.ts). */
const scheduledBodySchema = z.strictObject({
  jobSpec: jobBodySchema.omit({ arguments: true }),
  schedule: z.string(),
  suspend: z.boolean(),
  concurrency: z.boolean(),
});

const hexId = () => randomBytes(12).toString('hex');

function send(response: ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    response.writeHead(status).end();
    return;
  }
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

async function readBody(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? undefined : JSON.parse(text);
}

function validSchedule(schedule: string): boolean {
  return SHORTCUTS.includes(schedule) || /^(\S+\s+){4}\S+$/.test(schedule.trim());
}

export async function startHfJobsEmulator(
  options: {
    token?: string;
    namespace?: string;
    schedulingMs?: number;
    keepAliveMs?: number;
    hourlyOverrides?: Record<string, number>;
  } = {},
): Promise<HfJobsEmulator> {
  const token = options.token ?? `hf_emulator_${randomBytes(6).toString('hex')}`;
  const namespace = options.namespace ?? 'shepherd-test';
  const owner = { id: '5e9ecfc04957053f60648a3e', name: namespace, type: 'user' as const };
  const hardware = hardwareFixture(options.hourlyOverrides);
  const records = new Map<string, JobRecord>();
  const scheduled = new Map<string, EmulatedScheduledJob>();
  const requests: RecordedRequest[] = [];
  const drops: Array<{ afterEvents: number; times: number; how: DropKind }> = [];
  const openStreams = new Set<ServerResponse>();
  let hardwareStatus: number | undefined;
  const root = await mkdtemp(path.join(tmpdir(), 'hf-jobs-emulator-'));

  function emit(record: JobRecord, line: string): void {
    record.events.push({ data: line, timestamp: new Date().toISOString() });
    for (const listener of record.listeners) listener();
  }

  function finish(record: JobRecord, stage: HubJobStage, message: string | null): void {
    if (FINAL.has(record.job.status.stage)) return;
    for (const timer of record.timers) clearTimeout(timer);
    const at = new Date().toISOString();
    record.job.status = { stage, message, failureCount: stage === 'ERROR' ? 1 : 0 };
    record.job.finishedAt = at;
    record.job.updatedAt = at;
    delete record.child;
    for (const listener of record.listeners) listener();
  }

  function killGroup(record: JobRecord, signal: NodeJS.Signals): void {
    const pid = record.child?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // Already gone.
    }
  }

  function stopChild(record: JobRecord): void {
    killGroup(record, 'SIGTERM');
    record.timers.push(setTimeout(() => killGroup(record, 'SIGKILL'), 2_000));
  }

  function startRunning(record: JobRecord): void {
    if (record.job.status.stage !== 'SCHEDULING') return;
    const at = new Date().toISOString();
    record.job.status = { stage: 'RUNNING', message: null, failureCount: 0 };
    record.job.startedAt = at;
    emit(record, `===== Job started at ${at} =====`);
    const argv = [...(record.job.command ?? []), ...(record.job.arguments ?? [])];
    const child = spawn(argv[0] ?? 'false', argv.slice(1), {
      cwd: record.dir,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: record.dir,
        ...record.job.environment,
        ...record.secretValues,
      },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    record.child = child;
    const readers = [child.stdout, child.stderr].map((stream) => {
      const lines = createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY });
      lines.on('line', (line) => emit(record, line));
      return new Promise<void>((resolve) => lines.once('close', () => resolve()));
    });
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.once('exit', (code, signal) => resolve([code, signal])),
    );
    child.once('error', (error) => finish(record, 'ERROR', `failed to start ${argv[0]}: ${error.message}`));
    void Promise.all([exited, ...readers]).then(([[code, signal]]) => {
      if (record.cancelled) finish(record, 'CANCELED', null);
      else if (record.timedOut)
        finish(record, 'ERROR', `Job timeout: exceeded ${record.job.timeoutSeconds} seconds`);
      else if (code === 0) finish(record, 'COMPLETED', null);
      else
        finish(
          record,
          'ERROR',
          code === null ? `Job killed by ${signal}` : `Job failed with exit code: ${code}`,
        );
    });
    const limitMs = (record.job.timeoutSeconds ?? 1800) * 1000;
    record.timers.push(
      setTimeout(() => {
        record.timedOut = true;
        stopChild(record);
      }, limitMs),
    );
  }

  async function createJob(body: unknown, response: ServerResponse): Promise<void> {
    const parsed = jobBodySchema.safeParse(body);
    if (!parsed.success) return send(response, 400, { error: z.prettifyError(parsed.error) });
    const spec = parsed.data;
    if (!hardware.some((item) => item.name === spec.flavor)) {
      return send(response, 400, { error: `Invalid flavor: ${spec.flavor}` });
    }
    if ((spec.dockerImage === undefined) === (spec.spaceId === undefined)) {
      return send(response, 400, { error: 'Either dockerImage or spaceId must be provided' });
    }
    const at = new Date().toISOString();
    const job: EmulatedJob = {
      type: 'job',
      id: hexId(),
      status: { stage: 'SCHEDULING', message: null, failureCount: 0 },
      createdAt: at,
      updatedAt: at,
      startedAt: null,
      finishedAt: null,
      createdBy: { id: owner.id, name: owner.name },
      dockerImage: spec.dockerImage ?? null,
      spaceId: spec.spaceId ?? null,
      command: spec.command ?? null,
      arguments: spec.arguments ?? [],
      environment: spec.environment,
      flavor: spec.flavor,
      arch: spec.arch ?? 'amd64',
      // The Hub's default when none is sent (hub-docs jobs-pricing.md: "the default timeout is set to 30 minutes").
      timeoutSeconds: spec.timeoutSeconds ?? 1800,
      attempts: spec.attempts ?? 1,
      owner,
      initiator: owner,
      secrets: Object.keys(spec.secrets ?? {}),
      labels: spec.labels ?? null,
      volumes: null,
    };
    const record: JobRecord = {
      job,
      events: [],
      listeners: new Set(),
      dir: await mkdtemp(path.join(root, 'job-')),
      secretValues: spec.secrets ?? {},
      cancelled: false,
      timedOut: false,
      timers: [],
      connections: 0,
    };
    records.set(job.id, record);
    record.timers.push(setTimeout(() => startRunning(record), options.schedulingMs ?? 200));
    send(response, 200, job);
  }

  function cancel(record: JobRecord, response: ServerResponse): void {
    if (!FINAL.has(record.job.status.stage)) {
      record.cancelled = true;
      if (record.child === undefined) finish(record, 'CANCELED', null);
      else stopChild(record);
    }
    send(response, 200, record.job);
  }

  function streamLogs(record: JobRecord, request: IncomingMessage, response: ServerResponse): void {
    record.connections += 1;
    const drop = drops[0];
    if (drop !== undefined) {
      drop.times -= 1;
      if (drop.times <= 0) drops.shift();
    }
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    openStreams.add(response);
    let sent = 0;
    const keepAlive = setInterval(() => response.write(': keep-alive\n\n'), options.keepAliveMs ?? 30_000);
    const cleanup = () => {
      clearInterval(keepAlive);
      record.listeners.delete(pump);
      openStreams.delete(response);
    };
    function pump(): void {
      while (sent < record.events.length) {
        if (drop !== undefined && sent >= drop.afterEvents) {
          if (drop.how === 'stall' && !FINAL.has(record.job.status.stage)) return;
          if (drop.how === 'hang') {
            clearInterval(keepAlive);
            record.listeners.delete(pump);
            return;
          }
          cleanup();
          if (drop.how === 'reset') response.destroy();
          else response.end();
          return;
        }
        response.write(`data: ${JSON.stringify(record.events[sent])}\n\n`);
        sent += 1;
      }
      if (FINAL.has(record.job.status.stage)) {
        cleanup();
        response.end();
      }
    }
    record.listeners.add(pump);
    request.on('close', cleanup);
    pump();
  }

  function createScheduled(body: unknown, response: ServerResponse): void {
    const parsed = scheduledBodySchema.safeParse(body);
    if (!parsed.success) {
      send(response, 400, { error: z.prettifyError(parsed.error) });
      return;
    }
    const { jobSpec, schedule, suspend, concurrency } = parsed.data;
    if (!validSchedule(schedule)) {
      send(response, 400, { error: `Invalid schedule: ${schedule}` });
      return;
    }
    if (!hardware.some((item) => item.name === jobSpec.flavor)) {
      send(response, 400, { error: `Invalid flavor: ${jobSpec.flavor}` });
      return;
    }
    const at = new Date().toISOString();
    const created: EmulatedScheduledJob = {
      id: hexId(),
      schedule,
      suspend,
      concurrency,
      createdAt: at,
      updatedAt: at,
      jobSpec: {
        dockerImage: jobSpec.dockerImage ?? null,
        spaceId: jobSpec.spaceId ?? null,
        command: jobSpec.command ?? null,
        environment: jobSpec.environment,
        flavor: jobSpec.flavor,
        arch: jobSpec.arch ?? 'amd64',
        timeoutSeconds: jobSpec.timeoutSeconds ?? 1800,
        attempts: jobSpec.attempts ?? 1,
        labels: jobSpec.labels ?? null,
        volumes: null,
      },
      owner,
      status: { lastJob: null, nextJobRunAt: null },
    };
    scheduled.set(created.id, created);
    send(response, 200, created);
  }

  async function route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://emulator');
    const method = request.method ?? 'GET';
    const authorization = request.headers.authorization;
    const body = method === 'POST' ? await readBody(request) : undefined;
    requests.push({ method, path: url.pathname, authorization, body });
    if (method === 'GET' && url.pathname === '/api/jobs/hardware') {
      return hardwareStatus === undefined
        ? send(response, 200, hardware)
        : send(response, hardwareStatus, { error: 'unavailable' });
    }
    if (authorization !== `Bearer ${token}`) {
      return send(response, 401, { error: 'Invalid credentials in Authorization header' });
    }
    if (method === 'GET' && url.pathname === '/api/whoami-v2')
      return send(response, 200, whoAmIFixture(namespace));
    const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    const [api, kind, space, id, action] = parts;
    if (api !== 'api' || (kind !== 'jobs' && kind !== 'scheduled-jobs') || space === undefined) {
      return send(response, 404, { error: 'Not found' });
    }
    if (space !== namespace) return send(response, 403, { error: `You cannot manage jobs in ${space}` });
    if (kind === 'scheduled-jobs') {
      if (id === undefined && method === 'POST') return createScheduled(body, response);
      if (id === undefined && method === 'GET') return send(response, 200, [...scheduled.values()]);
      const found = id === undefined ? undefined : scheduled.get(id);
      if (found === undefined || id === undefined)
        return send(response, 404, { error: 'Scheduled job not found' });
      if (method === 'DELETE') {
        scheduled.delete(id);
        return send(response, 204);
      }
      return send(response, 200, found);
    }
    if (id === undefined) {
      if (method === 'POST') return createJob(body, response);
      return send(
        response,
        200,
        [...records.values()].map((record) => record.job),
      );
    }
    const record = records.get(id);
    if (record === undefined) return send(response, 404, { error: 'Job not found' });
    if (action === undefined && method === 'GET') return send(response, 200, record.job);
    if (action === 'cancel' && method === 'POST') return cancel(record, response);
    if (action === 'logs' && method === 'GET') return streamLogs(record, request, response);
    return send(response, 404, { error: 'Not found' });
  }

  const server = createServer((request, response) => {
    route(request, response).catch((error: unknown) => send(response, 500, { error: String(error) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    token,
    namespace,
    requests,
    job: (jobId) => records.get(jobId)?.job,
    allJobs: () => [...records.values()].map((record) => record.job),
    scheduled,
    pidOf: (jobId) => records.get(jobId)?.child?.pid,
    logLines: (jobId) => records.get(jobId)?.events.map((event) => event.data) ?? [],
    logConnections: (jobId) => records.get(jobId)?.connections ?? 0,
    dropLogStreams: ({ afterEvents, times = 1, how = 'reset' }) => {
      drops.push({ afterEvents, times, how });
    },
    failHardware: (status) => {
      hardwareStatus = status;
    },
    async close() {
      const running = [...records.values()].filter((record) => record.child !== undefined);
      for (const record of records.values()) for (const timer of record.timers) clearTimeout(timer);
      for (const record of running) killGroup(record, 'SIGKILL');
      await Promise.all(
        running.map(
          (record) =>
            new Promise<void>((resolve) => {
              const child = record.child;
              if (child === undefined || child.exitCode !== null || child.signalCode !== null)
                return resolve();
              child.once('exit', () => resolve());
            }),
        ),
      );
      for (const stream of openStreams) stream.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(root, { recursive: true, force: true });
    },
  };
}
