import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { createRunsRuntime, type RunsRuntime } from '../../src/app/create-runs.js';
import { type Config, loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/logger.js';
import type { RunEvent } from '../../src/runs/lifecycle/run-events.js';
import { liveProcessGroups } from '../../src/runs/process-table.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

export const FIXTURES = path.resolve(import.meta.dirname, '../fixtures');
export const ALICE = { id: 'U-alice', name: 'alice' };
export const BOB = { id: 'U-bob', name: 'bob' };

export async function fixture(name: string): Promise<string> {
  return readFile(path.join(FIXTURES, name), 'utf8');
}

export interface Harness {
  config: Config;
  dataDir: string;
  prefix: string;
  runtime: RunsRuntime;
  events: RunEvent[];
  /** A second, independent instance on the same data dir and Redis prefix (a bot restart). */
  restart(): Promise<{ runtime: RunsRuntime; events: RunEvent[] }>;
  runFile(runId: string, file: string): Promise<string>;
  cleanup(): Promise<void>;
}

/** A run service on a temp data dir, a unique Redis prefix and `SHEPHERD_GPUS=4`. */
export async function createHarness(environment: Record<string, string> = {}): Promise<Harness> {
  const prefix = uniquePrefix('runs');
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'shepherd-runs-'));
  const config = loadConfig({
    SHEPHERD_DATA_DIR: dataDir,
    SHEPHERD_QUEUE_PREFIX: prefix,
    SHEPHERD_GPUS: '4',
    SHEPHERD_STOP_GRACE_S: '3',
    SHEPHERD_LOG_LEVEL: 'silent',
    ...environment,
  });
  const connections: Redis[] = [];
  const runtimes: RunsRuntime[] = [];
  const logger = createLogger('silent');

  async function build() {
    const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    connections.push(redis);
    const events: RunEvent[] = [];
    const runtime = await createRunsRuntime({
      config,
      redis,
      logger,
      environment: process.env,
      onEvent: (event) => {
        events.push(event);
      },
    });
    runtimes.push(runtime);
    return { runtime, events };
  }

  const first = await build();
  return {
    config,
    dataDir,
    prefix,
    runtime: first.runtime,
    events: first.events,
    restart: build,
    runFile: (runId, file) => readFile(path.join(first.runtime.store.runDir(runId), file), 'utf8'),
    async cleanup() {
      // Kill only the process groups of runs this harness started.
      for (const meta of await first.runtime.store.listRuns()) {
        if (meta.pgid === undefined) continue;
        try {
          process.kill(-meta.pgid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      // Launch records are written beside a run's start: let them finish before the directory goes.
      for (const runtime of runtimes) await runtime.settleLaunchRecords();
      for (const connection of connections) connection.disconnect();
      await deleteKeysWithPrefix(prefix);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Poll `check` until it returns a value other than undefined/false, or fail after `timeoutMs`. */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 20_000,
  label = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${label}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * True while a live (non-zombie) process of the group exists. Zombies are ignored: a finished child of
 * this test process stays a zombie until Node reaps it on a later event-loop turn.
 */
export function groupExists(pgid: number): boolean {
  return liveProcessGroups().has(pgid);
}

export function metricSteps(text: string): number[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => (JSON.parse(line) as { step: number }).step);
}
