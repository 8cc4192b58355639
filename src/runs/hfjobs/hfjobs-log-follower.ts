import { appendFile, readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { RunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { writeFileAtomic } from '../records/atomic-file.js';
import { RUN_FILES } from '../records/run-files.js';
import type { HfJobsClient } from './hfjobs-client.js';
import { createLogReports } from './hfjobs-log-reports.js';
import { isFinalStage } from './hfjobs-states.js';

/**
 * Follows an HF job's log into `<runDir>/output.log`. The Hub's log stream replays the job's log from its
 * first line on every connection and `streamJobLogs` does not reconnect, so this reconnects while the job
 * lives and skips the events already written, counted by position the way the Python client does
 * (`start_event_idx` in huggingface_hub `_stream_sse_events`). The count is kept in the run directory, so
 * a new follower after a bot restart appends only what is new. A stream with no bytes at all (the Hub sends a
 * keep-alive every 30 s) for `idleMs` is dropped and reopened. Once the job has ended, one last full replay
 * picks up lines a dropped stream missed, then the follower ends.
 */

/** `{jobId, events}`: how many of that job's log events output.log already holds. */
export const HF_LOG_CURSOR_FILE = 'hfjobs-log-cursor.json';

const cursorSchema = z.object({ jobId: z.string(), events: z.number().int().nonnegative() });

export interface LogFollower {
  readonly jobId: string;
  /** Settles when the whole log of the ended job is written, or the follower was stopped. */
  readonly done: Promise<void>;
  finished(): boolean;
  stop(): Promise<void>;
}

interface LogFollowerOptions {
  client: Pick<HfJobsClient, 'streamLogs' | 'getJob'>;
  namespace: string;
  jobId: string;
  runDir: string;
  logger: Logger;
  /** First wait before reconnecting; doubles (to `maxReconnectDelayMs`) while connections bring nothing. */
  reconnectDelayMs?: number;
  maxReconnectDelayMs?: number;
  /** A stream silent this long (keep-alives included) is reopened: 4 keep-alive periods, as the Python client. */
  idleMs?: number;
  /** On the last replay after the job ended: silence this long means the replay is over. */
  drainIdleMs?: number;
  /** Lines are appended in batches at most this far apart. */
  flushMs?: number;
}

async function readCursor(file: string, jobId: string): Promise<number> {
  try {
    const parsed = cursorSchema.safeParse(JSON.parse(await readFile(file, 'utf8')));
    return parsed.success && parsed.data.jobId === jobId ? parsed.data.events : 0;
  } catch {
    return 0;
  }
}

/**
 * Appends lines and the count they reach together, in order, at most every `flushMs`; what the lines
 * report (evaluation, eval results, saved model) goes to its run file first (`hfjobs-log-reports.ts`).
 */
function createLogWriter(runDir: string, jobId: string, flushMs: number) {
  const outputFile = path.join(runDir, RUN_FILES.output);
  const cursorFile = path.join(runDir, HF_LOG_CURSOR_FILE);
  const reports = createLogReports(runDir, jobId);
  let pending: string[] = [];
  let written = 0;
  let timer: NodeJS.Timeout | undefined;
  let chain: Promise<void> = Promise.resolve();

  function flush(): Promise<void> {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    // Lines and their count are taken together, so the cursor never runs ahead of output.log.
    const lines = pending;
    const events = written;
    pending = [];
    if (lines.length === 0) return chain;
    chain = chain.then(async () => {
      const kept = await reports.apply(lines);
      await appendFile(outputFile, kept.map((line) => (line.endsWith('\n') ? line : `${line}\n`)).join(''));
      await writeFileAtomic(cursorFile, JSON.stringify({ jobId, events }));
    });
    return chain;
  }

  return {
    async start(): Promise<number> {
      written = await readCursor(cursorFile, jobId);
      await reports.start(written > 0);
      return written;
    },
    /** Event number `index` (0-based) of the job's log; earlier ones already written are skipped. */
    add(index: number, message: string): void {
      if (index < written) return;
      pending.push(message);
      written = index + 1;
      timer ??= setTimeout(() => {
        flush().catch(() => undefined);
      }, flushMs);
    },
    flush,
  };
}

export function followJobLog(options: LogFollowerOptions): LogFollower {
  const { client, namespace, jobId, logger } = options;
  const reconnectDelayMs = options.reconnectDelayMs ?? 2_000;
  const maxReconnectDelayMs = options.maxReconnectDelayMs ?? 30_000;
  const idleMs = options.idleMs ?? 120_000;
  const drainIdleMs = options.drainIdleMs ?? 5_000;
  const writer = createLogWriter(options.runDir, jobId, options.flushMs ?? 250);
  let stopped = false;
  let finished = false;
  let current: AbortController | undefined;
  let wake: (() => void) | undefined;

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  /** One connection: every event in order; returns how many events it carried. */
  async function streamOnce(silenceMs: number): Promise<number> {
    const controller = new AbortController();
    current = controller;
    let lastBytes = Date.now();
    const watchdog = setInterval(
      () => {
        if (Date.now() - lastBytes > silenceMs) controller.abort();
      },
      Math.max(20, Math.min(1_000, silenceMs / 4)),
    );
    let index = 0;
    try {
      const events = client.streamLogs(namespace, jobId, {
        signal: controller.signal,
        onBytes: () => {
          lastBytes = Date.now();
        },
      });
      for await (const event of events) {
        writer.add(index, event.message);
        index += 1;
      }
    } catch (error) {
      if (error instanceof RunError && error.code === 'backend_job_not_found') throw error;
      if (!controller.signal.aborted)
        logger.debug({ jobId, err: error }, 'HF job log stream broke; reconnecting');
    } finally {
      clearInterval(watchdog);
    }
    await writer.flush();
    return index;
  }

  /** Has the job ended? A failed check counts as "still running": the next round asks again. */
  async function ended(): Promise<boolean> {
    try {
      return isFinalStage((await client.getJob(namespace, jobId)).status.stage);
    } catch (error) {
      if (error instanceof RunError && error.code === 'backend_job_not_found') return true;
      logger.warn({ jobId, err: error }, 'could not read the HF job state while following its log');
      return false;
    }
  }

  async function follow(): Promise<void> {
    await writer.start();
    let delay = reconnectDelayMs;
    while (!stopped) {
      const events = await streamOnce(idleMs);
      if (stopped) break;
      if (await ended()) {
        if (!stopped) await streamOnce(drainIdleMs);
        break;
      }
      delay = events > 0 ? reconnectDelayMs : Math.min(maxReconnectDelayMs, delay * 2);
      await pause(delay);
    }
  }

  const done = follow()
    .catch((error: unknown) => {
      // The job is gone (deleted): there is nothing left to follow.
      logger.warn({ jobId, err: error }, 'stopped following the HF job log');
    })
    .then(() => writer.flush())
    .catch((error: unknown) => logger.error({ jobId, err: error }, 'could not write the HF job log'))
    .finally(() => {
      finished = true;
    });

  return {
    jobId,
    done,
    finished: () => finished,
    async stop() {
      stopped = true;
      current?.abort();
      wake?.();
      await done;
    },
  };
}
