import { randomBytes } from 'node:crypto';
import { appendFile, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { definedOnly } from '../../defined-only.js';
import { RUN_FILES } from '../run-files.js';
import type { LogCursor } from './kubernetes-log-lines.js';

/**
 * `<run dir>/kubernetes-log.json`: who follows the run's pod log (a lease, since the bot and every worker
 * may poll) and how far output.log has it (the cursor). Only the holder writes output.log, and each append
 * is announced first (`pending`), so a holder killed between the append and the cursor update is
 * recognised by the next one: output.log grew, so the pending cursor stands, and nothing is written twice.
 */

const LOG_STATE_FILE = 'kubernetes-log.json';

const cursorSchema = z.object({
  podUid: z.string(),
  since: z.string().optional(),
  sameCount: z.number().int().nonnegative(),
});

const stateSchema = z.object({
  holder: z.string().optional(),
  /** Epoch ms of the holder's last renewal. */
  renewedAt: z.number().optional(),
  /** The launch whose header is in output.log (`<job>#<launch>`). */
  launchKey: z.string().optional(),
  cursor: cursorSchema.optional(),
  /** An append announced but maybe not done: output.log was `fromBytes` long before it. */
  pending: z
    .object({
      fromBytes: z.number().int().nonnegative(),
      launchKey: z.string(),
      cursor: cursorSchema.optional(),
      ended: z.string().optional(),
    })
    .optional(),
  /** The launch whose ending line was written. */
  ended: z.string().optional(),
});

type LogState = z.infer<typeof stateSchema>;

async function readLogState(runDir: string): Promise<LogState> {
  try {
    const parsed = stateSchema.safeParse(
      JSON.parse(await readFile(path.join(runDir, LOG_STATE_FILE), 'utf8')),
    );
    return parsed.success ? parsed.data : {};
  } catch {
    return {};
  }
}

/** Temp file + rename: readers see the old state or the new one. (No fsync: this is bookkeeping.) */
async function writeLogState(runDir: string, state: LogState): Promise<void> {
  const target = path.join(runDir, LOG_STATE_FILE);
  const temporary = `${target}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(temporary, JSON.stringify(state), 'utf8');
  try {
    await rename(temporary, target);
  } catch (error) {
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
}

async function outputSize(runDir: string): Promise<number> {
  try {
    return (await stat(path.join(runDir, RUN_FILES.output))).size;
  } catch {
    return 0;
  }
}

/** The lease and cursor of one run's log, as one follower (`holder`) sees them. */
export function createLogLease(options: {
  runDir: string;
  holder: string;
  leaseMs: number;
  now: () => number;
  /** Wait after taking a stale lease before trusting it (two takers: the later rename wins). */
  confirmMs: number;
}) {
  const { runDir, holder } = options;
  // Every read-modify-write of the state file by this holder runs in turn: a renewal that read the state
  // before an append and wrote it back after would move the cursor back.
  let chain: Promise<unknown> = Promise.resolve();
  const inTurn = <T>(work: () => Promise<T>): Promise<T> => {
    const next = chain.then(work);
    chain = next.catch(() => undefined);
    return next;
  };

  async function held(): Promise<LogState | undefined> {
    const state = await readLogState(runDir);
    return state.holder === holder ? state : undefined;
  }

  return {
    held,
    /** Take the lease when it is free, ours or stale; also settles an append a dead holder left pending. */
    acquire: (): Promise<boolean> =>
      inTurn(async () => {
        const state = await readLogState(runDir);
        const fresh = options.now() - (state.renewedAt ?? 0) <= options.leaseMs;
        if (state.holder !== undefined && state.holder !== holder && fresh) return false;
        const next: LogState = { ...state, holder, renewedAt: options.now() };
        if (state.pending !== undefined) {
          const { fromBytes, ...done } = state.pending;
          if ((await outputSize(runDir)) > fromBytes) Object.assign(next, done);
          delete next.pending;
        }
        await writeLogState(runDir, next);
        await new Promise((resolve) => setTimeout(resolve, options.confirmMs));
        return (await held()) !== undefined;
      }),
    renew: (): Promise<boolean> =>
      inTurn(async () => {
        const state = await held();
        if (state === undefined) return false;
        await writeLogState(runDir, { ...state, renewedAt: options.now() });
        return true;
      }),
    release: (): Promise<void> =>
      inTurn(async () => {
        const state = await held();
        if (state === undefined) return;
        const { holder: _holder, renewedAt: _renewedAt, ...rest } = state;
        await writeLogState(runDir, rest);
      }),
    /**
     * Append `lines` to output.log (after `header` when this launch has none yet) and record what they
     * cover (the cursor after them, or the launch they end), announced first. False when the lease is no
     * longer ours: nothing is written.
     */
    append: (
      lines: readonly string[],
      covers: { launchKey: string; header: string; cursor?: LogCursor; ended?: string },
    ): Promise<boolean> =>
      inTurn(async () => {
        const state = await held();
        if (state === undefined) return false;
        const { header, ...rest } = covers;
        const done = definedOnly(rest);
        const text = [...(state.launchKey === covers.launchKey ? [] : [header]), ...lines].join('\n');
        await writeLogState(runDir, { ...state, pending: { fromBytes: await outputSize(runDir), ...done } });
        await appendFile(path.join(runDir, RUN_FILES.output), `${text}\n`, 'utf8');
        await writeLogState(runDir, { ...state, ...done, renewedAt: options.now() });
        return true;
      }),
  };
}

export type LogLease = ReturnType<typeof createLogLease>;
