import { type FSWatcher, watch } from 'node:fs';
import type { Logger } from '../logger.js';
import { type WokenFiles, wokenFileBit } from './woken-files.js';

/** The grid woken evaluations are due on (ms): at most this much later than the debounce allows. */
const BATCH_MS = 25;
/** How soon a wake-up that found the run's lease taken tries again. */
const LOCKED_RETRY_MS = 100;

/** What one evaluation reports back: `locked` when another evaluation of the run held its lease. */
export type WakeOutcome = 'done' | 'locked';

/** Starts watching a directory; `onChange` gets the changed file's name. The real one is `fs.watch`. */
export type DirectoryWatch = (
  directory: string,
  onChange: (fileName: string | undefined) => void,
) => { close(): void };

interface RunWakeups {
  /** Watch the run's directory (idempotent); a new line in its files wakes `evaluate`. */
  follow(runId: string, directory: string): void;
  /** Stop watching the run; a pending wake-up is dropped (the timer's last tick reads the rest). */
  release(runId: string): void;
  /** How many runs are watched: each holds one watcher. */
  size(): number;
  /**
   * Stop watching everything and wait for evaluations under way: one cut off by a closed Redis would keep the
   * run's lease until it expires, and the next process could not evaluate the run meanwhile.
   */
  close(): Promise<void>;
}

interface RunWakeState {
  watcher: { close(): void };
  lastStartMs: number;
  running: boolean;
  /** A change arrived during an evaluation (or it found the lease taken): exactly one more follows. */
  pending: boolean;
  /** The files that changed since the last evaluation began (woken-files.ts). */
  files: WokenFiles;
  /** The grid time its evaluation is due at, while one is scheduled. */
  dueMs?: number;
}

/** The runs due at one grid time, and the one timer that starts them. */
interface DueSlot {
  timer: NodeJS.Timeout;
  runs: Map<string, RunWakeState>;
}

export const watchWithFs: DirectoryWatch = (directory, onChange) => {
  const watcher: FSWatcher = watch(directory, { persistent: false }, (_event, fileName) =>
    onChange(fileName === null ? undefined : String(fileName)),
  );
  // The directory went away (a deleted run): the watch is over; the timer's ticks carry on.
  watcher.on('error', () => watcher.close());
  return watcher;
};

/**
 * Event-driven evaluation: a run's new lines wake its evaluation within milliseconds instead of waiting for the
 * next timer tick. Each run is evaluated at most `maxEvalsPerS` times a second, so a chatty run costs no more
 * than a fast timer; an idle run costs nothing between ticks. The timer stays for time-based detectors and for
 * filesystems where watches do not fire (NFS).
 */
export function createRunWakeups(options: {
  /** `files`: which of the run's files changed since its last evaluation began (woken-files.ts). */
  evaluate: (runId: string, files: WokenFiles) => Promise<WakeOutcome>;
  maxEvalsPerS: number;
  logger: Logger;
  watchDirectory?: DirectoryWatch;
  clock?: () => number;
}): RunWakeups {
  const { logger } = options;
  const watchDirectory = options.watchDirectory ?? watchWithFs;
  const clock = options.clock ?? Date.now;
  const gapMs = options.maxEvalsPerS > 0 ? 1000 / options.maxEvalsPerS : Number.POSITIVE_INFINITY;
  const runs = new Map<string, RunWakeState>();
  const slots = new Map<number, DueSlot>();
  const underWay = new Set<Promise<unknown>>();
  let closed = false;

  /** The slot's runs start together: one timer for them all, as they were due within one grid step. */
  function startSlot(dueMs: number): void {
    const slot = slots.get(dueMs);
    if (slot === undefined) return;
    slots.delete(dueMs);
    const evaluations: Array<Promise<void>> = [];
    for (const [runId, state] of slot.runs) evaluations.push(evaluateNow(runId, state));
    const batch = Promise.all(evaluations);
    underWay.add(batch);
    void batch.finally(() => underWay.delete(batch));
  }

  function evaluateSoon(runId: string, state: RunWakeState, waitMs: number): void {
    // Due times are rounded up to a shared grid, so the runs due within one step are evaluated in one turn
    // of the event loop, on one timer: with thousands of runs, waking the process (and arming a timer) once
    // per run costs more than the work.
    const now = clock();
    const dueMs = Math.ceil((now + waitMs) / BATCH_MS) * BATCH_MS;
    state.dueMs = dueMs;
    const slot = slots.get(dueMs);
    if (slot !== undefined) {
      slot.runs.set(runId, state);
      return;
    }
    const timer = setTimeout(() => startSlot(dueMs), dueMs - now);
    timer.unref();
    slots.set(dueMs, { timer, runs: new Map([[runId, state]]) });
  }

  /** Takes the run out of its slot (the slot's timer goes with its last run). */
  function unschedule(runId: string, state: RunWakeState): void {
    const dueMs = state.dueMs;
    if (dueMs === undefined) return;
    delete state.dueMs;
    const slot = slots.get(dueMs);
    if (slot === undefined || slot.runs.get(runId) !== state) return;
    slot.runs.delete(runId);
    if (slot.runs.size > 0) return;
    clearTimeout(slot.timer);
    slots.delete(dueMs);
  }

  function wake(runId: string, files: WokenFiles): void {
    const state = runs.get(runId);
    if (state === undefined) return;
    state.files |= files;
    if (state.dueMs !== undefined) return;
    if (state.running) {
      state.pending = true;
      return;
    }
    evaluateSoon(runId, state, Math.max(0, state.lastStartMs + gapMs - clock()));
  }

  async function evaluateNow(runId: string, state: RunWakeState): Promise<void> {
    delete state.dueMs;
    if (runs.get(runId) !== state) return;
    state.running = true;
    state.lastStartMs = clock();
    const files = state.files;
    state.files = 0;
    let outcome: WakeOutcome = 'done';
    try {
      outcome = await options.evaluate(runId, files);
    } catch (error) {
      // The next wake-up reads these files too (their cursors did not move); the timer tick retries them all.
      state.files |= files;
      logger.warn({ runId, err: error }, 'woken evaluation failed; the timer tick retries');
    } finally {
      state.running = false;
    }
    if (runs.get(runId) !== state) return;
    if (outcome === 'locked') {
      // Another evaluation holds the lease and may have started before these lines: look again shortly.
      state.pending = false;
      state.files |= files;
      evaluateSoon(runId, state, LOCKED_RETRY_MS);
      return;
    }
    if (state.pending) {
      state.pending = false;
      wake(runId, 0);
    }
  }

  return {
    follow(runId, directory) {
      if (closed || gapMs === Number.POSITIVE_INFINITY || runs.has(runId)) return;
      try {
        const watcher = watchDirectory(directory, (fileName) => {
          const bit = wokenFileBit(fileName);
          if (bit !== 0) wake(runId, bit);
        });
        runs.set(runId, { watcher, lastStartMs: 0, running: false, pending: false, files: 0 });
      } catch (error) {
        // No directory yet, or no inotify (some network filesystems): the timer still ticks.
        logger.debug({ runId, directory, err: error }, 'run files not watched; timer only');
      }
    },
    release(runId) {
      const state = runs.get(runId);
      if (state === undefined) return;
      runs.delete(runId);
      unschedule(runId, state);
      state.watcher.close();
    },
    size: () => runs.size,
    async close() {
      closed = true;
      for (const runId of [...runs.keys()]) this.release(runId);
      await Promise.all([...underWay]);
    },
  };
}
