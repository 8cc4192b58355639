import { createHash } from 'node:crypto';
import { readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { definedOnly } from '../../defined-only.js';
import { writeFileAtomic } from '../records/atomic-file.js';
import { RUN_FILES } from '../records/run-files.js';
import { appendRunFile } from '../records/run-store.js';
import type { RunMeta } from '../records/run-types.js';
import { readResume } from '../run-reports.js';
import {
  type CheckpointEntry,
  describe,
  entryKey,
  type IncidentMark,
  kindLabel,
  linkSafe,
  parseEntry,
  pinFolder,
  protectionText,
  type ResumePlan,
  resumePlan,
} from './checkpoint-entries.js';
import { createCheckpointPins } from './checkpoint-pins.js';

/**
 * A run's checkpoint history: every `shepherd.save_checkpoint()` appends a line to `checkpoints.jsonl`
 * (step, path, time, launch, file size and mtime). Shepherd adds the health of each save from the
 * incidents it saw (a checkpoint saved at or after the first bad step of a NaN, divergence or spike in
 * the same launch is "bad"), and chooses where an approved fix resumes: the last healthy, intact
 * checkpoint recorded before the incident's first bad step — not the one a SIGTERM handler saved on
 * NaN weights. The chosen checkpoint is pinned when the fix is proposed (checkpoint-pins) and checked
 * again after the old process stopped, just before the fix's launch. The history file is the run's own
 * report; it can only choose among its own checkpoints.
 */

const MAX_HISTORY_BYTES = 512 * 1024;
const KEEP_SECONDS = 7 * 24 * 3600;

interface ResumeChoice {
  entry?: CheckpointEntry;
  incident: IncidentMark;
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
  /** The incident the fix answers (absent in pins written before it was recorded). */
  incident?: IncidentMark;
}

interface FixLaunch {
  launch: number;
  fix: number;
  maxFixes: number;
  kind: string;
}

type FileState = 'intact' | 'unknown' | 'changed' | 'missing';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** Whether the file of a save is still the one saved: by size and mtime, when the helper recorded them. */
async function fileState(runDir: string, entry: Omit<CheckpointEntry, 'health'>): Promise<FileState> {
  if (entry.checkpoint === null) return 'unknown';
  const file = path.resolve(runDir, entry.checkpoint);
  try {
    const info = await stat(file);
    const { size, mtime } = entry.extra;
    if (typeof size === 'number' && info.size !== size) return 'changed';
    if (typeof mtime === 'number' && Math.abs(info.mtimeMs / 1000 - mtime) > 0.01) return 'changed';
    return typeof size === 'number' || typeof mtime === 'number' ? 'intact' : 'unknown';
  } catch {
    return 'missing';
  }
}

/** The save of the highest step (the later one of a step saved twice). */
function latest(entries: readonly CheckpointEntry[]): CheckpointEntry | undefined {
  return entries.reduce<CheckpointEntry | undefined>(
    (chosen, entry) =>
      chosen === undefined ||
      entry.step > chosen.step ||
      (entry.step === chosen.step && entry.ts >= chosen.ts)
        ? entry
        : chosen,
    undefined,
  );
}

/** Point resume.json at the plan's checkpoint (or remove it to start over) and say so in output.log. */
async function applyPlan(directory: string, plan: ResumePlan): Promise<void> {
  const resumeFile = path.join(directory, RUN_FILES.resume);
  if (plan.kind === 'scratch') await rm(resumeFile, { force: true });
  if (plan.kind === 'resume') {
    const { entry } = plan;
    const state = { ...entry.extra, step: entry.step, checkpoint: plan.path, ts: entry.ts };
    await writeFileAtomic(
      resumeFile,
      JSON.stringify({ ...state, ...definedOnly({ pinned_from: plan.pinnedFrom }) }),
    );
  }
  await appendRunFile(directory, RUN_FILES.output, `=== Shepherd: ${plan.log} ===`);
}

interface CheckpointHistoryOptions {
  redis: Redis;
  prefix: string;
  runDir: (runId: string) => string;
  /** `SHEPHERD_PIN_MAX_GB` in bytes. */
  pinMaxBytes: number;
  /** Whether the bot runs as root (tests pass false to pin files of another user). */
  isRoot?: boolean;
}

export function createCheckpointHistory(options: CheckpointHistoryOptions) {
  const { redis, prefix } = options;
  const marksKey = (runId: string) => `${prefix}:incident-marks:${runId}`;
  const pinKey = (runId: string) => `${prefix}:fix-pin:${runId}`;
  const fixLaunchKey = (runId: string) => `${prefix}:fix-launch:${runId}`;
  const pins = createCheckpointPins({
    redis,
    prefix,
    runDir: options.runDir,
    maxBytes: options.pinMaxBytes,
    ...definedOnly({ isRoot: options.isRoot }),
  });

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

  /** The history, oldest first, with health, whether each file is still the one saved, and its pin. */
  async function list(runId: string): Promise<CheckpointEntry[]> {
    let text: string;
    try {
      const file = path.join(options.runDir(runId), RUN_FILES.checkpoints);
      const size = (await stat(file)).size;
      text = await readFile(file, 'utf8');
      if (size > MAX_HISTORY_BYTES)
        text = text.slice(text.indexOf('\n', text.length - MAX_HISTORY_BYTES) + 1);
    } catch {
      return [];
    }
    const known = await marks(runId);
    const pinned = await pins.intactPins(runId);
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
      const state = await fileState(options.runDir(runId), parsed);
      if (state !== 'unknown') entry.intact = state === 'intact';
      const pin = pinned.get(entryKey(parsed));
      if (pin !== undefined) entry.pinned = pin.path;
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

  /** The last healthy checkpoint recorded before the incident's first bad step, intact or pinned. */
  async function chooseResumePoint(runId: string, incident: IncidentMark): Promise<ResumeChoice> {
    const what = `the ${kindLabel(incident.kind)} at step ${incident.firstBadStep}`;
    const candidates = (await list(runId)).filter(
      (entry) =>
        entry.step < incident.firstBadStep &&
        (entry.launch === undefined || entry.launch <= incident.launch) &&
        entry.health !== 'bad' &&
        (entry.intact !== false || entry.pinned !== undefined),
    );
    const best = latest(candidates);
    if (best === undefined) {
      return {
        incident,
        text: `No healthy checkpoint was saved before ${what}, so the fix restarts from the beginning.`,
      };
    }
    return {
      entry: best,
      incident,
      text: `The fix resumes from the checkpoint at ${describe(best)}, the last one saved before ${what}.`,
    };
  }

  /** Pin the chosen checkpoint now, before anything stops the run; returns the card's sentence about it. */
  async function protect(runId: string, entry: CheckpointEntry): Promise<string | undefined> {
    if (entry.checkpoint === null) return undefined;
    const directory = options.runDir(runId);
    const resume = await readResume({ runDir: options.runDir }, runId);
    const { size, mtime } = entry.extra;
    const outcome = await pins.pin(
      runId,
      {
        key: entryKey(entry),
        id: pinFolder(entry),
        source: path.resolve(directory, entry.checkpoint),
        linkSafe: linkSafe(entry, await list(runId)),
        expected: definedOnly({
          size: typeof size === 'number' ? size : undefined,
          mtime: typeof mtime === 'number' ? mtime : undefined,
        }),
      },
      resume?.checkpoint == null ? undefined : path.resolve(directory, resume.checkpoint),
    );
    return protectionText(outcome, directory);
  }

  /**
   * Record what the launch of an approved fix (identified by its exact script) must resume from, and pin
   * that checkpoint. Returns a sentence for the card about the pin, when a checkpoint was chosen.
   */
  async function pinFix(
    runId: string,
    fix: { script: string; fix: number; maxFixes: number; kind: string; resume?: ResumeChoice },
  ): Promise<string | undefined> {
    const resume: FixPin['resume'] =
      fix.resume === undefined
        ? 'keep'
        : fix.resume.entry === undefined
          ? 'scratch'
          : { entry: fix.resume.entry };
    const protection = fix.resume?.entry === undefined ? undefined : await protect(runId, fix.resume.entry);
    const pin: FixPin = {
      sha: sha256(fix.script),
      fix: fix.fix,
      maxFixes: fix.maxFixes,
      kind: fix.kind,
      resume,
      ...definedOnly({ incident: fix.resume?.incident }),
    };
    await redis.set(pinKey(runId), JSON.stringify(pin), 'EX', KEEP_SECONDS);
    return protection;
  }

  /**
   * After the old process stopped: the pinned copy if it is still as pinned, else the file if it is still
   * the one saved, else the best checkpoint that is still intact, else from scratch — and say which.
   */
  async function planResume(runId: string, pin: FixPin): Promise<ResumePlan | undefined> {
    if (pin.resume === 'keep') return undefined;
    const before =
      pin.incident === undefined
        ? ''
        : ` before the ${kindLabel(pin.incident.kind)} at step ${pin.incident.firstBadStep}`;
    if (pin.resume === 'scratch') {
      const why = `no healthy checkpoint was saved${before}`;
      return { kind: 'scratch', log: `${why}; starting over`, note: `it starts from scratch: ${why}` };
    }
    const { entry } = pin.resume;
    const pinned = (await pins.intactPins(runId)).get(entryKey(entry));
    if (pinned !== undefined) return resumePlan(options.runDir(runId), { ...entry, pinned: pinned.path });
    // The entry was listed when the card was built; its pin, if any, is no longer intact.
    const unpinned: CheckpointEntry = { ...entry };
    delete unpinned.pinned;
    const state = await fileState(options.runDir(runId), unpinned);
    if (state === 'intact' || state === 'unknown') return resumePlan(options.runDir(runId), unpinned);
    const lost = `the step-${entry.step} checkpoint was ${state === 'missing' ? 'deleted' : 'overwritten'} while the run stopped`;
    const again = pin.incident === undefined ? undefined : await chooseResumePoint(runId, pin.incident);
    if (again?.entry === undefined) {
      return { kind: 'scratch', log: `${lost}; starting over`, note: `${lost}; restarting from scratch` };
    }
    return resumePlan(options.runDir(runId), again.entry, lost);
  }

  /**
   * Before a launch: when the script about to run is the pinned fix, check the chosen checkpoint again
   * (the old process has stopped by now), point resume.json at what survived (or remove it to start
   * over) and remember that this launch follows fix N. Returns a sentence for the thread.
   */
  async function beforeLaunch(meta: RunMeta): Promise<string | undefined> {
    const raw = await redis.get(pinKey(meta.id));
    if (raw === null) return undefined;
    const pin = JSON.parse(raw) as FixPin;
    const directory = options.runDir(meta.id);
    const script = await readFile(path.join(directory, RUN_FILES.script), 'utf8').catch(() => '');
    if (sha256(script) !== pin.sha) return undefined;
    const plan = await planResume(meta.id, pin);
    if (plan !== undefined) await applyPlan(directory, plan);
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
    return plan?.note;
  }

  /** An automatic relaunch (the process is gone) resumes from the last healthy intact save, pinned; null: scratch. */
  async function prepareRelaunch(runId: string): Promise<{ from: number | null }> {
    const directory = options.runDir(runId);
    const history = await list(runId);
    if (history.length === 0)
      return { from: (await readResume({ runDir: options.runDir }, runId))?.step ?? null };
    const best = latest(
      history.filter(
        (entry) => entry.health !== 'bad' && (entry.intact !== false || entry.pinned !== undefined),
      ),
    );
    if (best === undefined) {
      await applyPlan(directory, {
        kind: 'scratch',
        log: 'no intact healthy checkpoint; relaunching from scratch',
        note: 'from scratch',
      });
      return { from: null };
    }
    await protect(runId, best);
    const pinned = (await pins.intactPins(runId)).get(entryKey(best));
    const entry: CheckpointEntry = { ...best };
    delete entry.pinned;
    if (pinned !== undefined) entry.pinned = pinned.path;
    await applyPlan(directory, resumePlan(directory, entry));
    return { from: best.step };
  }

  /** The fix the given launch follows, if it was launched for one. */
  async function fixLaunch(runId: string): Promise<FixLaunch | undefined> {
    const raw = await redis.get(fixLaunchKey(runId));
    return raw === null ? undefined : (JSON.parse(raw) as FixLaunch);
  }

  return {
    list,
    noteIncident,
    chooseResumePoint,
    pinFix,
    beforeLaunch,
    prepareRelaunch,
    fixLaunch,
    releasePins: pins.release,
  };
}

export type CheckpointHistory = ReturnType<typeof createCheckpointHistory>;
