import { randomBytes } from 'node:crypto';
import { lstat, mkdir, realpath, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { definedOnly } from '../../defined-only.js';
import { errorMessage } from '../../errors.js';
import { RUN_FILES } from '../records/run-files.js';
import {
  fingerprintTree,
  PINNED_ENTRY,
  placeTree,
  samePrint,
  type TreePrint,
  type TreeRefusal,
} from './pin-files.js';

/**
 * Pinned checkpoints: the checkpoint a fix will resume from is placed in
 * `<runDir>/.shepherd/pinned/<pin id>/<its own name>` when the fix is proposed, so nothing the training
 * script writes afterwards — a periodic save, or a SIGTERM handler saving NaN weights while the run is
 * stopped for the fix — can change what the fix resumes from. A hard link costs no space and survives the
 * script deleting its file or renaming a new one over it, but shares the bytes with a file rewritten in
 * place; the caller says when a link is safe, otherwise the checkpoint is copied (a reflink where the
 * filesystem allows). Each pin's fingerprint lives in Redis, and a pin that no longer matches it is not
 * used. At most `maxBytes` per run; pins go when a newer pin replaces them (unless resume.json still
 * points into them) and all of them when the run ends.
 */

const PIN_RECORD = z.object({
  id: z.string(),
  key: z.string(),
  /** Absolute path of the pinned checkpoint (file or folder). */
  path: z.string(),
  method: z.enum(['link', 'copy', 'mixed']),
  bytes: z.number(),
  entries: z.array(PINNED_ENTRY),
});

type PinRecord = z.infer<typeof PIN_RECORD>;

interface PinRequest {
  /** Identity of the history entry (launch, step, save time, path). */
  key: string;
  /** Folder name under `.shepherd/pinned/`. */
  id: string;
  /** Absolute path of the checkpoint. */
  source: string;
  /** Hard links are safe: the script writes each checkpoint to a new name. */
  linkSafe: boolean;
  /** Size and mtime (epoch seconds) recorded at the save; a checkpoint that differs is not pinned. */
  expected: { size?: number; mtime?: number };
}

export type PinOutcome =
  | { pinned: PinRecord; reused: boolean }
  | { refused: 'too_large'; bytes: number; maxBytes: number }
  | { refused: TreeRefusal['refused'] | 'changed' | 'failed'; detail: string };

const KEEP_SECONDS = 7 * 24 * 3600;

export function createCheckpointPins(options: {
  redis: Redis;
  prefix: string;
  runDir: (runId: string) => string;
  maxBytes: number;
  /** Whether the bot runs as root (then only files of the run's own user are pinned). */
  isRoot?: boolean;
}) {
  const { redis } = options;
  const pinsKey = (runId: string) => `${options.prefix}:checkpoint-pins:${runId}`;
  const isRoot = options.isRoot ?? process.getuid?.() === 0;

  /**
   * `<runDir>/.shepherd/pinned`, made if asked. The run's user owns the run directory, so a planted
   * symbolic link must not lead the bot's writes (or its clean-up) elsewhere.
   */
  async function pinnedRoot(runId: string, create: boolean): Promise<string | undefined> {
    const root = path.join(options.runDir(runId), RUN_FILES.pinned);
    for (const directory of [path.dirname(root), root]) {
      if (create) await mkdir(directory, { recursive: true });
      const info = await lstat(directory).catch(() => undefined);
      if (info === undefined) return undefined;
      if (info.isSymbolicLink() || !info.isDirectory()) {
        throw new Error(`${path.relative(options.runDir(runId), directory)} is not a plain folder`);
      }
    }
    return root;
  }

  async function records(runId: string): Promise<PinRecord[]> {
    const raw = await redis.hgetall(pinsKey(runId));
    return Object.values(raw).flatMap((text) => {
      try {
        const parsed = PIN_RECORD.safeParse(JSON.parse(text));
        return parsed.success ? [parsed.data] : [];
      } catch {
        return [];
      }
    });
  }

  async function isIntact(record: PinRecord): Promise<boolean> {
    const print = await fingerprintTree(record.path);
    return !('refused' in print) && samePrint(print.entries, record.entries);
  }

  /** The pins whose files are still exactly as pinned, by history key. */
  async function intactPins(runId: string): Promise<Map<string, PinRecord>> {
    const intact = new Map<string, PinRecord>();
    for (const record of await records(runId)) {
      if (await isIntact(record)) intact.set(record.key, record);
    }
    return intact;
  }

  /** Drop pins other than `keepKey`, except the one resume.json points into (a launch may still need it). */
  async function prune(runId: string, keepKey: string, resumePath: string | undefined): Promise<number> {
    const root = await pinnedRoot(runId, false);
    let keptBytes = 0;
    for (const record of await records(runId)) {
      const folder = path.dirname(record.path);
      const inUse =
        resumePath !== undefined &&
        (resumePath === record.path || resumePath.startsWith(`${record.path}${path.sep}`));
      if (record.key === keepKey || inUse || root === undefined || path.dirname(folder) !== root) {
        keptBytes += record.bytes;
        continue;
      }
      await rm(folder, { recursive: true, force: true });
      await redis.hdel(pinsKey(runId), record.key);
    }
    return keptBytes;
  }

  /** The checkpoint's owner must be the run's user when the bot is root (the owner of its history file). */
  async function ownerUid(runId: string): Promise<number | undefined> {
    if (!isRoot) return undefined;
    return (await lstat(path.join(options.runDir(runId), RUN_FILES.checkpoints))).uid;
  }

  function matchesSave(print: TreePrint, expected: PinRequest['expected']): boolean {
    if (expected.size !== undefined && print.root.size !== expected.size) return false;
    return expected.mtime === undefined || Math.abs(print.root.mtimeMs / 1000 - expected.mtime) <= 0.01;
  }

  /** Pin a checkpoint (or reuse its intact pin). Never throws: a refusal says why in `detail`. */
  async function pin(runId: string, request: PinRequest, resumePath?: string): Promise<PinOutcome> {
    const existing = (await intactPins(runId)).get(request.key);
    if (existing !== undefined) return { pinned: existing, reused: true };
    // A checkpoint named through a symbolic link is pinned as the file it points to now.
    const source = await realpath(request.source).catch(() => request.source);
    try {
      const before = await fingerprintTree(source, definedOnly({ ownerUid: await ownerUid(runId) }));
      if ('refused' in before) return before;
      if (!matchesSave(before, request.expected)) {
        return { refused: 'changed', detail: 'it was rewritten after it was saved' };
      }
      const keptBytes = await prune(runId, request.key, resumePath);
      if (before.bytes + keptBytes > options.maxBytes) {
        return { refused: 'too_large', bytes: before.bytes, maxBytes: options.maxBytes };
      }
      return await place(runId, request, source, before);
    } catch (error) {
      return { refused: 'failed', detail: errorMessage(error) };
    }
  }

  /** Place the tree in a temporary folder, check the source did not move meanwhile, then publish it. */
  async function place(
    runId: string,
    request: PinRequest,
    source: string,
    before: TreePrint,
  ): Promise<PinOutcome> {
    const root = (await pinnedRoot(runId, true)) as string;
    const temporary = path.join(root, `.tmp-${randomBytes(4).toString('hex')}`);
    const name = path.basename(request.source);
    await mkdir(temporary);
    try {
      const method = await placeTree(source, path.join(temporary, name), before.entries, request.linkSafe);
      const after = await fingerprintTree(source);
      if ('refused' in after || !samePrint(before.entries, after.entries)) {
        return { refused: 'changed', detail: 'the run wrote to it while it was being pinned' };
      }
      const folder = path.join(root, request.id);
      await rm(folder, { recursive: true, force: true });
      await rename(temporary, folder);
      const pinnedPath = path.join(folder, name);
      const print = await fingerprintTree(pinnedPath);
      if ('refused' in print) return { refused: 'failed', detail: print.detail };
      const record: PinRecord = {
        id: request.id,
        key: request.key,
        path: pinnedPath,
        method,
        bytes: before.bytes,
        entries: print.entries,
      };
      await redis
        .multi()
        .hset(pinsKey(runId), request.key, JSON.stringify(record))
        .expire(pinsKey(runId), KEEP_SECONDS)
        .exec();
      return { pinned: record, reused: false };
    } finally {
      await rm(temporary, { recursive: true, force: true });
    }
  }

  /** Remove every pin of a run (it ended: nothing will resume from them). */
  async function release(runId: string): Promise<void> {
    const root = await pinnedRoot(runId, false);
    if (root !== undefined) await rm(root, { recursive: true, force: true });
    await redis.del(pinsKey(runId));
  }

  return { pin, intactPins, release };
}
