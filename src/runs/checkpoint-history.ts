import { createHash } from 'node:crypto';
import { readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { writeFileAtomic } from './atomic-file.js';
import { RUN_FILES } from './run-files.js';
import { appendRunFile } from './run-store.js';
import type { RunMeta } from './run-types.js';

/**
 * A run's checkpoint history: every `shepherd.save_checkpoint()` appends a line to `checkpoints.jsonl`
 * (step, path, time, launch, file size and mtime). Shepherd adds the health of each save from the
 * incidents it saw (a checkpoint saved at or after the first bad step of a NaN, divergence or spike in
 * the same launch is "bad"), and chooses where an approved fix resumes: the last healthy, intact
 * checkpoint recorded before the incident's first bad step — not the one a SIGTERM handler saved on
 * NaN weights. The history file is the run's own report; it can only choose among its own checkpoints.
 */

const CHECKPOINT_HISTORY_FILE = 'checkpoints.jsonl';
const MAX_HISTORY_BYTES = 512 * 1024;
const KEEP_SECONDS = 7 * 24 * 3600;

type CheckpointHealth = 'ok' | 'bad' | 'unknown';

interface CheckpointEntry {
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
  /** Everything else the script passed to save_checkpoint (kept for resume.json). */
  extra: Record<string, unknown>;
}

/** The first bad step of a NaN, divergence or spike, per launch. */
interface IncidentMark {
  launch: number;
  kind: string;
  firstBadStep: number;
}

interface ResumeChoice {
  entry?: CheckpointEntry;
  /** A sentence for the approval card. */
  text: string;
}

/** What an approved fix does at its launch: resume from a chosen checkpoint, from scratch, or as usual. */
interface FixPin {
  sha: string;
  fix: number;
  maxFixes: number;
  kind: string;
  resume: 'keep' | 'scratch' | { entry: CheckpointEntry };
}

interface FixLaunch {
  launch: number;
  fix: number;
  maxFixes: number;
  kind: string;
}

const KIND_LABEL: Record<string, string> = { nan: 'NaN', divergence: 'divergence', spike: 'spike' };

export const kindLabel = (kind: string) => KIND_LABEL[kind] ?? kind;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

function parseEntry(line: string): Omit<CheckpointEntry, 'health'> | undefined {
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

export function createCheckpointHistory(options: {
  redis: Redis;
  prefix: string;
  runDir: (runId: string) => string;
}) {
  const { redis, prefix } = options;
  const marksKey = (runId: string) => `${prefix}:incident-marks:${runId}`;
  const pinKey = (runId: string) => `${prefix}:fix-pin:${runId}`;
  const fixLaunchKey = (runId: string) => `${prefix}:fix-launch:${runId}`;

  async function marks(runId: string): Promise<IncidentMark[]> {
    const raw = await redis.lrange(marksKey(runId), 0, -1);
    return raw.flatMap((item) => {
      try {
        return [JSON.parse(item) as IncidentMark];
      } catch {
        return [];
      }
    });
  }

  async function isIntact(
    runId: string,
    entry: Omit<CheckpointEntry, 'health'>,
  ): Promise<boolean | undefined> {
    if (entry.checkpoint === null) return undefined;
    const file = path.resolve(options.runDir(runId), entry.checkpoint);
    try {
      const info = await stat(file);
      const { size, mtime } = entry.extra;
      if (typeof size === 'number' && info.size !== size) return false;
      if (typeof mtime === 'number' && Math.abs(info.mtimeMs / 1000 - mtime) > 0.01) return false;
      return typeof size === 'number' || typeof mtime === 'number' ? true : undefined;
    } catch {
      return false;
    }
  }

  /** The history, oldest first, with health and whether each file is still the one saved. */
  async function list(runId: string): Promise<CheckpointEntry[]> {
    let text: string;
    try {
      const file = path.join(options.runDir(runId), CHECKPOINT_HISTORY_FILE);
      const size = (await stat(file)).size;
      text = await readFile(file, 'utf8');
      if (size > MAX_HISTORY_BYTES)
        text = text.slice(text.indexOf('\n', text.length - MAX_HISTORY_BYTES) + 1);
    } catch {
      return [];
    }
    const known = await marks(runId);
    const entries: CheckpointEntry[] = [];
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      const parsed = parseEntry(line);
      if (parsed === undefined) continue;
      const entry: CheckpointEntry = { ...parsed, health: parsed.launch === undefined ? 'unknown' : 'ok' };
      const bad = known.find((mark) => mark.launch === parsed.launch && mark.firstBadStep <= parsed.step);
      if (bad !== undefined) {
        entry.health = 'bad';
        entry.healthNote = `saved after the ${kindLabel(bad.kind)} at step ${bad.firstBadStep}`;
      }
      const intact = await isIntact(runId, parsed);
      if (intact !== undefined) entry.intact = intact;
      entries.push(entry);
    }
    return entries;
  }

  /** Remember where a NaN, divergence or spike began (called when its alert is raised). */
  async function noteIncident(runId: string, mark: IncidentMark): Promise<void> {
    await redis
      .multi()
      .rpush(marksKey(runId), JSON.stringify(mark))
      .expire(marksKey(runId), KEEP_SECONDS)
      .exec();
  }

  function describe(entry: CheckpointEntry): string {
    const where = entry.checkpoint === null ? '' : ` (${entry.checkpoint}`;
    const when =
      entry.ts > 0
        ? `${where === '' ? ' (' : ', '}saved ${new Date(entry.ts * 1000).toISOString().slice(11, 19)} UTC)`
        : where === ''
          ? ''
          : ')';
    return `step ${entry.step}${where}${when}`;
  }

  /** The last healthy, intact checkpoint recorded before the incident's first bad step. */
  async function chooseResumePoint(runId: string, incident: IncidentMark): Promise<ResumeChoice> {
    const what = `the ${kindLabel(incident.kind)} at step ${incident.firstBadStep}`;
    const candidates = (await list(runId)).filter(
      (entry) =>
        entry.step < incident.firstBadStep &&
        (entry.launch === undefined || entry.launch <= incident.launch) &&
        entry.health !== 'bad' &&
        entry.intact !== false,
    );
    const best = candidates.reduce<CheckpointEntry | undefined>(
      (chosen, entry) =>
        chosen === undefined ||
        entry.step > chosen.step ||
        (entry.step === chosen.step && entry.ts >= chosen.ts)
          ? entry
          : chosen,
      undefined,
    );
    if (best === undefined) {
      return {
        text: `No healthy checkpoint was saved before ${what}, so the fix restarts from the beginning.`,
      };
    }
    return {
      entry: best,
      text: `The fix resumes from the checkpoint at ${describe(best)}, the last one saved before ${what}.`,
    };
  }

  /** Record what the launch of an approved fix (identified by its exact script) must resume from. */
  async function pinFix(
    runId: string,
    fix: { script: string; fix: number; maxFixes: number; kind: string; resume?: ResumeChoice },
  ): Promise<void> {
    const resume: FixPin['resume'] =
      fix.resume === undefined
        ? 'keep'
        : fix.resume.entry === undefined
          ? 'scratch'
          : { entry: fix.resume.entry };
    const pin: FixPin = {
      sha: sha256(fix.script),
      fix: fix.fix,
      maxFixes: fix.maxFixes,
      kind: fix.kind,
      resume,
    };
    await redis.set(pinKey(runId), JSON.stringify(pin), 'EX', KEEP_SECONDS);
  }

  /**
   * Before a launch: when the script about to run is the pinned fix, point resume.json at the chosen
   * checkpoint (or remove it to start over) and remember that this launch follows fix N.
   */
  async function beforeLaunch(meta: RunMeta): Promise<void> {
    const raw = await redis.get(pinKey(meta.id));
    if (raw === null) return;
    const pin = JSON.parse(raw) as FixPin;
    const directory = options.runDir(meta.id);
    const script = await readFile(path.join(directory, RUN_FILES.script), 'utf8').catch(() => '');
    if (sha256(script) !== pin.sha) return;
    const resumeFile = path.join(directory, RUN_FILES.resume);
    if (pin.resume === 'scratch') {
      await rm(resumeFile, { force: true });
      await appendRunFile(
        directory,
        RUN_FILES.output,
        '=== Shepherd: no healthy checkpoint; starting over ===',
      );
    } else if (pin.resume !== 'keep') {
      const { entry } = pin.resume;
      await writeFileAtomic(
        resumeFile,
        JSON.stringify({ ...entry.extra, step: entry.step, checkpoint: entry.checkpoint, ts: entry.ts }),
      );
      await appendRunFile(
        directory,
        RUN_FILES.output,
        `=== Shepherd: resuming from the checkpoint at step ${entry.step} (the last healthy one) ===`,
      );
    }
    const record: FixLaunch = {
      launch: meta.launchCount,
      fix: pin.fix,
      maxFixes: pin.maxFixes,
      kind: pin.kind,
    };
    await redis
      .multi()
      .set(fixLaunchKey(meta.id), JSON.stringify(record), 'EX', KEEP_SECONDS)
      .del(pinKey(meta.id))
      .exec();
  }

  /** The fix the given launch follows, if it was launched for one. */
  async function fixLaunch(runId: string): Promise<FixLaunch | undefined> {
    const raw = await redis.get(fixLaunchKey(runId));
    return raw === null ? undefined : (JSON.parse(raw) as FixLaunch);
  }

  return { list, noteIncident, chooseResumePoint, pinFix, beforeLaunch, fixLaunch };
}

export type CheckpointHistory = ReturnType<typeof createCheckpointHistory>;
