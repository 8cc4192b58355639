import path from 'node:path';
import { definedOnly } from '../../defined-only.js';
import type { PinOutcome } from './checkpoint-pins.js';
import { formatBytes } from './pin-files.js';

/** The pure side of the checkpoint history: its entries, their identity and the sentences about them. */

type CheckpointHealth = 'ok' | 'bad' | 'unknown';

export interface CheckpointEntry {
  step: number;
  /** Path as the script gave it (relative to the run directory), or null. */
  checkpoint: string | null;
  /** Epoch seconds of the save. */
  ts: number;
  launch?: number;
  health: CheckpointHealth;
  /** Why it is bad ("saved after the NaN at step 26"). */
  healthNote?: string;
  /** false when the file is gone or was overwritten since (size or mtime changed). */
  intact?: boolean;
  /** Absolute path of a copy Shepherd pinned for a fix, still exactly as pinned. */
  pinned?: string;
  /** Everything else the script passed to save_checkpoint (kept for resume.json). */
  extra: Record<string, unknown>;
}

/** The first bad step of a NaN, divergence or spike, per launch. */
export interface IncidentMark {
  launch: number;
  kind: string;
  firstBadStep: number;
}

const KIND_LABEL: Record<string, string> = { nan: 'NaN', divergence: 'divergence', spike: 'spike' };

export const kindLabel = (kind: string) => KIND_LABEL[kind] ?? kind;

export function parseEntry(line: string): Omit<CheckpointEntry, 'health'> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const { step, checkpoint, ts, launch, size, mtime, ...extra } = value as Record<string, unknown>;
  if (typeof step !== 'number' || !Number.isFinite(step)) return undefined;
  const entry: Omit<CheckpointEntry, 'health'> = {
    step,
    checkpoint: typeof checkpoint === 'string' ? checkpoint : null,
    ts: typeof ts === 'number' ? ts : 0,
    extra: {
      ...extra,
      ...(typeof size === 'number' ? { size } : {}),
      ...(typeof mtime === 'number' ? { mtime } : {}),
    },
  };
  if (typeof launch === 'number' && Number.isInteger(launch)) entry.launch = launch;
  return entry;
}

/** One save, told apart from a later save of the same step (a stop handler's) by its time and path. */
export const entryKey = (entry: Pick<CheckpointEntry, 'launch' | 'step' | 'ts' | 'checkpoint'>) =>
  JSON.stringify([entry.launch ?? null, entry.step, entry.ts, entry.checkpoint]);

/** The folder name of its pin: `launch1-step60-1715000000123`. */
export const pinFolder = (entry: Pick<CheckpointEntry, 'launch' | 'step' | 'ts'>) =>
  `launch${entry.launch ?? 0}-step${entry.step}-${Math.round(entry.ts * 1000)}`.replace(/[^\w.-]/g, '_');

/**
 * A hard link is safe only for a checkpoint written once: its name carries its step (`step60.pt`,
 * `checkpoint-60/`) and no other save in the history uses the same path. A name saved again (one
 * `ckpt.pt`, Lightning's `last.ckpt`) may be rewritten in place, which the link would see too: copy it.
 */
export function linkSafe(entry: CheckpointEntry, history: readonly CheckpointEntry[]): boolean {
  if (entry.checkpoint === null || !Number.isInteger(entry.step)) return false;
  const carriesStep = new RegExp(`(^|\\D)${entry.step}(\\D|$)`).test(path.basename(entry.checkpoint));
  const key = entryKey(entry);
  const reused = history.some((other) => other.checkpoint === entry.checkpoint && entryKey(other) !== key);
  return carriesStep && !reused;
}

export function describe(entry: CheckpointEntry): string {
  const where = entry.checkpoint === null ? '' : ` (${entry.checkpoint}`;
  const when =
    entry.ts > 0
      ? `${where === '' ? ' (' : ', '}saved ${new Date(entry.ts * 1000).toISOString().slice(11, 19)} UTC)`
      : where === ''
        ? ''
        : ')';
  return `step ${entry.step}${where}${when}`;
}

const UNPINNED_RISK =
  'if the run changes it before the fix starts, the fix resumes from an earlier checkpoint or starts over, and says so.';

/** The card's sentence about the protection of the chosen checkpoint. */
export function protectionText(outcome: PinOutcome, runDir: string): string {
  if ('pinned' in outcome) {
    const where = path.relative(runDir, outcome.pinned.path);
    const how =
      outcome.pinned.method === 'link'
        ? `pinned it (a hard link at ${where}; the run writes each checkpoint to a new file)`
        : `pinned a copy of it at ${where}`;
    return `Shepherd ${how}, so nothing the run writes before the fix starts, a save from its stop handler included, can change it.`;
  }
  if (outcome.refused === 'too_large') {
    const limit =
      outcome.maxBytes === 0
        ? 'SHEPHERD_PIN_MAX_GB is 0'
        : `over SHEPHERD_PIN_MAX_GB (${formatBytes(outcome.maxBytes)} per run)`;
    return `It is not pinned: it is ${formatBytes(outcome.bytes)}, ${limit}; ${UNPINNED_RISK}`;
  }
  return `It is not pinned (${outcome.detail}); ${UNPINNED_RISK}`;
}

/** Where a fix's launch resumes from, decided after the old process stopped; `note` is for the thread. */
export type ResumePlan =
  | { kind: 'scratch'; log: string; note: string }
  | {
      kind: 'resume';
      entry: CheckpointEntry;
      path: string | null;
      pinnedFrom?: string;
      log: string;
      note: string;
    };

/** A plan that resumes from `entry`: its pinned copy when there is one, else its own file. */
export function resumePlan(runDir: string, entry: CheckpointEntry, lost?: string): ResumePlan {
  const pinnedAt = entry.pinned === undefined ? undefined : path.relative(runDir, entry.pinned);
  const from =
    pinnedAt !== undefined
      ? ` (pinned by Shepherd before the stop: ${pinnedAt})`
      : entry.checkpoint === null
        ? ''
        : ` (${entry.checkpoint})`;
  const plan = {
    kind: 'resume' as const,
    entry,
    path: entry.pinned ?? entry.checkpoint,
    ...definedOnly({ pinnedFrom: pinnedAt === undefined ? undefined : (entry.checkpoint ?? undefined) }),
  };
  return lost === undefined
    ? {
        ...plan,
        log: `resuming from the checkpoint at step ${entry.step}, the last healthy one${from}`,
        note: `it resumes from the step-${entry.step} checkpoint${from}`,
      }
    : {
        ...plan,
        log: `${lost}; resuming from the checkpoint at step ${entry.step}${from}`,
        note: `${lost}; resuming from the step-${entry.step} checkpoint instead${from}`,
      };
}
