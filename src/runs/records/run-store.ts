import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createTwoFilesPatch } from 'diff';
import type { Redis } from 'ioredis';
import type { BackendKind } from '../../config/backend-kinds.js';
import { RunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { writeFileAtomic } from './atomic-file.js';
import { RUN_FILES } from './run-files.js';
import { parseRunMeta } from './run-meta-schema.js';
import { type RunMeta, TERMINAL_STATUSES } from './run-types.js';

/**
 * A run lives in `<dataDir>/runs/<id>/{meta.json, metrics.jsonl, output.log, train.py, train_v1.py, …,
 * audit.jsonl, resume.json}`. The training process runs in that directory and can write to it, so when
 * the store has Redis (always, in the app) the record in Redis is authoritative — thread, requester,
 * status, approvals' effects — and `meta.json` is only a mirror Shepherd writes for people and tools.
 * A run that rewrites its `meta.json` changes nothing Shepherd routes by.
 */

/** What `createRun` needs; the store fills id, timestamps and bookkeeping. */
interface NewRunInput {
  name: string;
  script: string;
  threadId: string;
  requester: { id: string; name: string };
  gpus: number;
  maxHours: number;
  executor: BackendKind;
  modelId?: string;
  config?: Record<string, unknown>;
  args?: string[];
  /** Command-run fields copied into meta (command, cwd, scriptPath, environmentName, nodes). */
  launch?: Partial<
    Pick<
      RunMeta,
      | 'command'
      | 'cwd'
      | 'scriptPath'
      | 'environmentName'
      | 'nodes'
      | 'watch'
      | 'image'
      | 'flavor'
      | 'placement'
      | 'placementNotes'
      | 'hourlyUsd'
      | 'evalCommand'
      | 'logDir'
      | 'forkOf'
    >
  >;
}

export interface ScriptUpdate {
  meta: RunMeta;
  /** Unified diff from the previous version to the new one. */
  diff: string;
  /** File name the previous version was archived under (`train_v1.py`). */
  archivedAs: string;
}

export interface RunStore {
  readonly runsDir: string;
  runDir(runId: string): string;
  /** Create the directory, `train.py` and `meta.json` (status `pending_approval`). Not name-locked: callers serialise. */
  createRun(input: NewRunInput, now: Date): Promise<RunMeta>;
  readMeta(runId: string): Promise<RunMeta>;
  writeMeta(meta: RunMeta): Promise<void>;
  /** All runs, newest first. Unreadable directories are logged and skipped. */
  listRuns(): Promise<RunMeta[]>;
  /** By id, then by name (an active run first, else the newest). Throws `run_not_found` listing known runs. */
  findRun(reference: string): Promise<RunMeta>;
  readScript(runId: string, version?: number): Promise<string>;
  /** Archive `train.py` as `train_v<n>.py`, write the new source, bump `scriptVersion`, return the diff. */
  updateScript(runId: string, source: string, now: Date): Promise<ScriptUpdate>;
}

/** Lowercase, dashes, at most 48 characters; never empty. */
export function slugifyRunName(name: string): string {
  const slug = name
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/-{2,}/g, '-')
    .replace(/^[-.]+|[-.]+$/g, '')
    .slice(0, 48)
    .replace(/[-.]+$/g, '');
  return slug === '' ? 'run' : slug;
}

/** `r-MMDD-xxxx`: short enough to type, random enough not to clash (mkdir decides on a clash). */
function newRunId(now: Date): string {
  const month = String(now.getUTCMonth() + 1).padStart(2, '0');
  const day = String(now.getUTCDate()).padStart(2, '0');
  return `r-${month}${day}-${randomBytes(2).toString('hex')}`;
}

const RUN_ID_PATTERN = /^r-\d{4}-[0-9a-f]{4,}$/;

/** A name shaped like a run id would make `findRun` ambiguous. */
export function looksLikeRunId(name: string): boolean {
  return RUN_ID_PATTERN.test(name);
}

interface RunStoreOptions {
  dataDir: string;
  logger: Logger;
  /** Where the authoritative run records live; without it (unit tests) meta.json is read directly. */
  redis?: Redis;
  prefix?: string;
}

export function createRunStore(options: RunStoreOptions): RunStore {
  const runsDir = path.resolve(options.dataDir, 'runs');
  const { redis } = options;
  const prefix = options.prefix ?? 'shepherd';
  const recordKey = (runId: string) => `${prefix}:run:${runId}`;
  const indexKey = `${prefix}:runs`;
  const importedKey = `${prefix}:runs-imported`;
  let imported: Promise<void> | undefined;
  const runDir = (runId: string) => {
    if (!/^[A-Za-z0-9._-]+$/.test(runId) || runId.startsWith('.')) {
      throw new RunError('run_not_found', `invalid run id ${JSON.stringify(runId)}`);
    }
    return path.join(runsDir, runId);
  };

  /**
   * Runs created before the records moved to Redis (or a Redis that lost its data) are imported once from
   * their meta.json; from then on a directory without a record is not a run.
   */
  function ensureImported(): Promise<void> {
    imported ??= (async () => {
      if (redis === undefined || (await redis.exists(importedKey)) === 1) return;
      for (const entry of await readRunDirectories()) {
        if ((await redis.exists(recordKey(entry))) === 1) continue;
        try {
          const meta = await readMetaFile(entry);
          if (meta.id !== entry) continue;
          await redis.multi().set(recordKey(entry), JSON.stringify(meta)).sadd(indexKey, entry).exec();
          options.logger.info({ runId: entry }, 'imported run record from meta.json');
        } catch (error) {
          options.logger.warn({ runId: entry, err: error }, 'skipping unreadable run directory');
        }
      }
      await redis.set(importedKey, new Date().toISOString());
    })().catch((error: unknown) => {
      imported = undefined;
      throw error;
    });
    return imported;
  }

  async function readRunDirectories(): Promise<string[]> {
    try {
      return (await readdir(runsDir)).filter((entry) => !entry.startsWith('.'));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
  }

  async function readMeta(runId: string): Promise<RunMeta> {
    if (redis === undefined) return readMetaFile(runId);
    runDir(runId);
    await ensureImported();
    const raw = await redis.get(recordKey(runId));
    if (raw === null) throw new RunError('run_not_found', `no run with id ${runId}`);
    try {
      return parseRunMeta(JSON.parse(raw));
    } catch (error) {
      throw new RunError('run_meta_invalid', `the record of run ${runId} is invalid`, { cause: error });
    }
  }

  async function readMetaFile(runId: string): Promise<RunMeta> {
    let text: string;
    try {
      text = await readFile(path.join(runDir(runId), RUN_FILES.meta), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new RunError('run_not_found', `no run with id ${runId}`);
      }
      throw error;
    }
    try {
      return parseRunMeta(JSON.parse(text));
    } catch (error) {
      throw new RunError('run_meta_invalid', `meta.json of run ${runId} is invalid`, { cause: error });
    }
  }

  async function writeMeta(meta: RunMeta): Promise<void> {
    if (redis !== undefined) {
      await redis.multi().set(recordKey(meta.id), JSON.stringify(meta)).sadd(indexKey, meta.id).exec();
    }
    // The mirror for people and tools; never read back when Redis holds the record.
    await writeFileAtomic(path.join(runDir(meta.id), RUN_FILES.meta), `${JSON.stringify(meta, null, 2)}\n`);
  }

  async function listRuns(): Promise<RunMeta[]> {
    let entries: string[];
    if (redis === undefined) {
      entries = await readRunDirectories();
    } else {
      await ensureImported();
      entries = await redis.smembers(indexKey);
    }
    const metas: RunMeta[] = [];
    for (const entry of entries) {
      try {
        metas.push(await readMeta(entry));
      } catch (error) {
        options.logger.warn({ runId: entry, err: error }, 'skipping unreadable run directory');
      }
    }
    return metas.sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id));
  }

  async function uniqueName(requested: string): Promise<string> {
    const base = slugifyRunName(requested);
    const taken = new Set(
      (await listRuns()).filter((meta) => !TERMINAL_STATUSES.has(meta.status)).map((meta) => meta.name),
    );
    // A name that looks like a run id would make `findRun` ambiguous.
    let candidate = RUN_ID_PATTERN.test(base) ? `run-${base}` : base;
    for (let suffix = 2; taken.has(candidate); suffix += 1) candidate = `${base}-${suffix}`;
    return candidate;
  }

  async function createRun(input: NewRunInput, now: Date): Promise<RunMeta> {
    await mkdir(runsDir, { recursive: true });
    const name = await uniqueName(input.name);
    let id = newRunId(now);
    for (let attempt = 0; ; attempt += 1) {
      try {
        await mkdir(runDir(id));
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 20) throw error;
        id = newRunId(now);
      }
    }
    const iso = now.toISOString();
    const meta: RunMeta = {
      schemaVersion: 1,
      id,
      name,
      threadId: input.threadId,
      requester: input.requester,
      status: 'pending_approval',
      gpus: input.gpus,
      gpuIndices: [],
      maxHours: input.maxHours,
      scriptVersion: 1,
      executor: input.executor,
      launchCount: 0,
      createdAt: iso,
      updatedAt: iso,
    };
    if (input.modelId !== undefined) meta.modelId = input.modelId;
    if (input.config !== undefined) meta.config = input.config;
    if (input.args !== undefined) meta.args = input.args;
    for (const [key, value] of Object.entries(input.launch ?? {})) {
      if (value !== undefined) Object.assign(meta, { [key]: value });
    }
    // A command that names no .py file has no script to keep (its files are copied as provenance).
    if (input.script !== '' || (meta.command === undefined && meta.watch === undefined))
      await writeFileAtomic(path.join(runDir(id), RUN_FILES.script), input.script);
    await writeMeta(meta);
    return meta;
  }

  async function findRun(reference: string): Promise<RunMeta> {
    const wanted = reference.trim();
    if (RUN_ID_PATTERN.test(wanted)) {
      try {
        return await readMeta(wanted);
      } catch (error) {
        if (!(error instanceof RunError) || error.code !== 'run_not_found') throw error;
      }
    }
    const runs = await listRuns();
    const slug = slugifyRunName(wanted);
    const matches = runs.filter((meta) => meta.name === wanted || meta.name === slug);
    const active = matches.find((meta) => !TERMINAL_STATUSES.has(meta.status));
    const found = active ?? matches[0];
    if (found !== undefined) return found;
    const known = runs.slice(0, 20).map((meta) => meta.name);
    const list = known.length === 0 ? '(none yet)' : known.join(', ');
    throw new RunError('run_not_found', `no run named ${wanted}; runs: ${list}`);
  }

  async function readScript(runId: string, version?: number): Promise<string> {
    const meta = await readMeta(runId);
    const file =
      version === undefined || version === meta.scriptVersion ? RUN_FILES.script : `train_v${version}.py`;
    try {
      return await readFile(path.join(runDir(runId), file), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new RunError('script_not_found', `run ${meta.name} has no script version ${version}`);
      }
      throw error;
    }
  }

  async function updateScript(runId: string, source: string, now: Date): Promise<ScriptUpdate> {
    const meta = await readMeta(runId);
    const directory = runDir(runId);
    const current = path.join(directory, RUN_FILES.script);
    const previous = await readFile(current, 'utf8');
    const archivedAs = `train_v${meta.scriptVersion}.py`;
    const nextVersion = meta.scriptVersion + 1;
    // Archive by copy, then replace train.py atomically, then meta: train.py is never absent (a rename
    // left a moment without it, which a reader could hit), and a crash in between only repeats the copy.
    await copyFile(current, path.join(directory, archivedAs));
    await writeFileAtomic(current, source);
    const next: RunMeta = { ...meta, scriptVersion: nextVersion, updatedAt: now.toISOString() };
    await writeMeta(next);
    const diff = createTwoFilesPatch(
      `train_v${meta.scriptVersion}.py`,
      `train_v${nextVersion}.py`,
      previous,
      source,
      undefined,
      undefined,
      { context: 3 },
    );
    return { meta: next, diff, archivedAs };
  }

  return { runsDir, runDir, createRun, readMeta, writeMeta, listRuns, findRun, readScript, updateScript };
}

/** Append a line to a run file (used for audit.jsonl and launch headers). */
export async function appendRunFile(directory: string, file: string, line: string): Promise<void> {
  await writeFile(path.join(directory, file), line.endsWith('\n') ? line : `${line}\n`, { flag: 'a' });
}
