import type { RunMeta } from '../records/run-types.js';

/**
 * What the run service tells the rest of the bot. The chat layer posts `message` into the run's thread
 * (`meta.threadId`); the monitor creates or removes its scheduler on `run-started` / `run-ended` /
 * `run-paused`.
 */
export type RunEventType =
  | 'run-started'
  | 'run-waiting'
  | 'run-ended'
  | 'run-paused'
  | 'run-status'
  /** Stopped at its max hours (paused, resumable); the thread is told. */
  | 'run-time-limit';

export interface RunEvent {
  type: RunEventType;
  meta: RunMeta;
  /** A ready-to-post sentence ("qwen-sft is running on GPUs 2,3"). */
  message: string;
}

export type RunEventHandler = (event: RunEvent) => void | Promise<void>;

export function describeGpus(indices: readonly number[]): string {
  if (indices.length === 0) return 'CPU';
  return `GPU${indices.length === 1 ? '' : 's'} ${indices.join(',')}`;
}

export function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}
