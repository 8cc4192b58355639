import { randomBytes } from 'node:crypto';
import { appendFile, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { definedOnly } from '../../defined-only.js';
import { RUN_FILES } from '../records/run-files.js';
import type { LogCursor } from './kubernetes-log-lines.js';

/**
 * `<run dir>/kubernetes-log.json`: who follows the run's pod log (a lease, since the bot and every worker
 * may poll) and how far output.log has it (the cursor). Only the holder writes output.log (and, for a pod
 * whose files Shepherd cannot see, metrics.jsonl), and each batch is announced first with its text
 * (`pending`, a redo record): a holder killed in the middle of a batch leaves it for the next one to
 * complete, byte for byte, so no line is written twice or lost.
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
  /**
   * A batch announced and maybe not (wholly) written: each file's length before it and the text it gets.
   * The next holder completes it (writes what is missing) and takes its cursor.
   */
  pending: z
    .object({
      writes: z.array(
        z.object({ file: z.string(), fromBytes: z.number().int().nonnegative(), text: z.string() }),
      ),
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

async function sizeOf(file: string): Promise<number> {
  try {
    return (await stat(file)).size;
  } catch {
    return 0;
  }
}

type Write = { file: string; fromBytes: number; text: string };

/** Write what a batch has not written yet (nothing when a file is already past it: left alone). */
async function completeWrites(runDir: string, writes: readonly Write[]): Promise<void> {
  for (const write of writes) {
    const file = path.join(runDir, write.file);
    const bytes = Buffer.from(write.text, 'utf8');
    const written = (await sizeOf(file)) - write.fromBytes;
    if (written >= 0 && written < bytes.length) await appendFile(file, bytes.subarray(Math.max(0, written)));
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
          const { writes, ...done } = state.pending;
          await completeWrites(runDir, writes);
          Object.assign(next, done);
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
     * Append `lines` to output.log (after `header` when this launch has none yet) and `metrics` to
     * metrics.jsonl, and record what they cover (the cursor after them, or the launch they end), announced
     * first. False when the lease is no longer ours: nothing is written.
     */
    append: (
      lines: readonly string[],
      covers: { launchKey: string; header: string; cursor?: LogCursor; ended?: string },
      metrics: readonly string[] = [],
    ): Promise<boolean> =>
      inTurn(async () => {
        const state = await held();
        if (state === undefined) return false;
        const { header, ...rest } = covers;
        const done = definedOnly(rest);
        const output = [...(state.launchKey === covers.launchKey ? [] : [header]), ...lines];
        const writes: Write[] = [];
        for (const [file, text] of [
          [RUN_FILES.output, output.map((line) => `${line}\n`).join('')],
          [RUN_FILES.metrics, metrics.map((line) => `${line}\n`).join('')],
        ] as const) {
          if (text !== '') writes.push({ file, fromBytes: await sizeOf(path.join(runDir, file)), text });
        }
        await writeLogState(runDir, { ...state, pending: { writes, ...done } });
        await completeWrites(runDir, writes);
        await writeLogState(runDir, { ...state, ...done, renewedAt: options.now() });
        return true;
      }),
  };
}

export type LogLease = ReturnType<typeof createLogLease>;
