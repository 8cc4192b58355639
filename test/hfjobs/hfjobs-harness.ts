import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inflateSync } from 'node:zlib';
import { z } from 'zod';
import type { Config } from '../../src/config/config.js';
import { createLogger } from '../../src/logger.js';
import type { ProcessState } from '../../src/runs/executor.js';
import {
  createHfJobsExecutor,
  type HfJobsExecutor,
  type HfJobsExecutorOptions,
} from '../../src/runs/hfjobs/hfjobs-executor.js';
import { PYTHON_RUNTIME_DIR } from '../../src/runs/records/run-files.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import type { HfJobsEmulator } from '../emulators/hf-jobs-server.js';
import { testRunMeta } from '../helpers/run-meta.js';

export const silentLogger = createLogger('silent');

export const HF_SETTINGS: Config['hfJobs'] = {
  namespace: undefined,
  image: 'pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime',
  flavor: undefined,
};

/** An executor against the emulator, with follower timings short enough for tests. */
export function emulatorExecutor(
  emulator: HfJobsEmulator,
  runsDir: string,
  overrides: {
    settings?: Partial<Config['hfJobs']>;
    token?: string;
    secrets?: Record<string, string>;
    idleMs?: number;
  } = {},
): HfJobsExecutor {
  const options: HfJobsExecutorOptions = {
    settings: { ...HF_SETTINGS, ...overrides.settings },
    hub: { url: emulator.url, token: overrides.token ?? emulator.token },
    runDir: (runId) => path.join(runsDir, runId),
    helperDir: PYTHON_RUNTIME_DIR,
    logger: silentLogger,
    terminatePollMs: 100,
    drainWaitMs: 5_000,
    ...(overrides.secrets === undefined ? {} : { secrets: overrides.secrets }),
    follower: {
      reconnectDelayMs: 100,
      maxReconnectDelayMs: 400,
      idleMs: overrides.idleMs ?? 5_000,
      drainIdleMs: 1_000,
      flushMs: 20,
    },
  };
  return createHfJobsExecutor(options);
}

export async function makeRunsDir(): Promise<string> {
  return mkdtemp(path.join(tmpdir(), 'shepherd-hfjobs-'));
}

/** A run directory holding `train.py`, and its meta (an HF run, running). */
export async function makeRun(
  runsDir: string,
  id: string,
  script: string,
  overrides: Partial<RunMeta> = {},
): Promise<{ meta: RunMeta; runDir: string }> {
  const runDir = path.join(runsDir, id);
  await mkdir(runDir, { recursive: true });
  await writeFile(path.join(runDir, 'train.py'), script, 'utf8');
  return { meta: testRunMeta(id, { executor: 'hfjobs', ...overrides }), runDir };
}

export async function readOutput(runDir: string): Promise<string> {
  return readFile(path.join(runDir, 'output.log'), 'utf8').catch(() => '');
}

export async function waitFor<T>(
  check: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export const isOver = (state: ProcessState) => state.kind !== 'alive' && state.kind !== 'pending';

/** Polls until `accept` holds; returns that state. */
export async function waitForState(
  executor: HfJobsExecutor,
  meta: RunMeta,
  accept: (state: ProcessState) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<ProcessState> {
  return waitFor(
    async () => {
      const state = (await executor.poll([meta])).get(meta.id);
      return state !== undefined && accept(state) ? state : undefined;
    },
    what,
    timeoutMs,
  );
}

const payloadSchema = z.object({
  files: z.record(z.string(), z.string()),
  runtime: z.string(),
  command: z.array(z.string()).nullable(),
  script: z.string().nullable(),
  args: z.array(z.string()),
  cwd: z.string(),
});

/** The files and start of a job, read back from its command (`python3 -u -c <bootstrap> <pieces…>`). */
export function decodeJobPayload(command: readonly string[]): z.infer<typeof payloadSchema> {
  const pieces = command.slice(4).join('');
  return payloadSchema.parse(JSON.parse(inflateSync(Buffer.from(pieces, 'base64')).toString('utf8')));
}

/** Lines of output.log equal to `line`. */
export function countLines(text: string, line: string): number {
  return text.split('\n').filter((candidate) => candidate === line).length;
}
