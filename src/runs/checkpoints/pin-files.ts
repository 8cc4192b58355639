import { constants, type Stats } from 'node:fs';
import { copyFile, link, lstat, mkdir, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';

/**
 * The file side of pinned checkpoints: a fingerprint of a file or folder tree (size and mtime of every
 * entry) and placing a tree elsewhere by hard links or copies. No Redis, no run knowledge.
 */

export const PINNED_ENTRY = z.object({
  /** Relative to the checkpoint ('' for the checkpoint itself). */
  path: z.string(),
  kind: z.enum(['file', 'directory']),
  /** Bytes of a file; 0 for a folder (a folder's own size says nothing about its content). */
  size: z.number(),
  mtimeMs: z.number(),
});

type PinnedEntry = z.infer<typeof PINNED_ENTRY>;

export interface TreePrint {
  entries: PinnedEntry[];
  /** Total bytes of the files. */
  bytes: number;
  /** The checkpoint's own stat (size and mtime as the helper recorded them in checkpoints.jsonl). */
  root: { size: number; mtimeMs: number };
}

export interface TreeRefusal {
  refused: 'missing' | 'unsafe';
  detail: string;
}

/** A checkpoint tree with more entries than this is not pinned (it is no checkpoint, or a mistake). */
const MAX_ENTRIES = 100_000;

/**
 * Size and mtime of every file and folder under `root` (the root itself may be a symbolic link, as in
 * `last.ckpt -> step60.ckpt`; links inside a folder are refused). With `ownerUid`, every entry must belong
 * to that user: a bot running as root must not copy a file the run's user could not read into the run.
 */
export async function fingerprintTree(
  root: string,
  options: { ownerUid?: number } = {},
): Promise<TreePrint | TreeRefusal> {
  let top: Stats;
  try {
    top = await stat(root);
  } catch {
    return { refused: 'missing', detail: `${path.basename(root)} is gone` };
  }
  const entries: PinnedEntry[] = [];
  let bytes = 0;
  // Breadth first, so a folder always comes before what it holds (placeTree relies on that).
  const queue: Array<{ relative: string; info: Stats }> = [{ relative: '', info: top }];
  for (let item = queue.shift(); item !== undefined; item = queue.shift()) {
    const { relative, info } = item;
    const shown = relative === '' ? path.basename(root) : relative;
    if (options.ownerUid !== undefined && info.uid !== options.ownerUid) {
      return { refused: 'unsafe', detail: `${shown} does not belong to the run's user` };
    }
    if (info.isSymbolicLink()) return { refused: 'unsafe', detail: `${shown} is a symbolic link` };
    if (!info.isFile() && !info.isDirectory()) {
      return { refused: 'unsafe', detail: `${shown} is not a regular file or folder` };
    }
    const kind = info.isFile() ? 'file' : 'directory';
    entries.push({ path: relative, kind, size: kind === 'file' ? info.size : 0, mtimeMs: info.mtimeMs });
    if (entries.length > MAX_ENTRIES) {
      return { refused: 'unsafe', detail: `more than ${MAX_ENTRIES} files` };
    }
    if (kind === 'file') bytes += info.size;
    else {
      for (const name of (await readdir(path.join(root, relative))).sort()) {
        const child = path.join(relative, name);
        queue.push({ relative: child, info: await lstat(path.join(root, child)) });
      }
    }
  }
  return { entries, bytes, root: { size: top.size, mtimeMs: top.mtimeMs } };
}

/** Whether two fingerprints describe the same tree, unchanged. */
export function samePrint(a: readonly PinnedEntry[], b: readonly PinnedEntry[]): boolean {
  return (
    a.length === b.length &&
    a.every((entry, index) => {
      const other = b[index];
      return (
        other !== undefined &&
        other.path === entry.path &&
        other.kind === entry.kind &&
        other.size === entry.size &&
        other.mtimeMs === entry.mtimeMs
      );
    })
  );
}

/** A hard link fails across filesystems or past a link limit; the file is then copied. */
const LINK_FALLBACK = new Set(['EXDEV', 'EPERM', 'EMLINK', 'ENOTSUP', 'EOPNOTSUPP']);

/**
 * Recreate the fingerprinted tree at `target` (which must not exist): folders are made, files are hard
 * links when `useLinks`, else copies — a reflink where the filesystem allows (COPYFILE_FICLONE falls back to
 * a plain copy). Returns how the files were placed.
 */
export async function placeTree(
  source: string,
  target: string,
  entries: readonly PinnedEntry[],
  useLinks: boolean,
): Promise<'link' | 'copy' | 'mixed'> {
  let linked = 0;
  let copied = 0;
  for (const entry of entries) {
    const from = path.join(source, entry.path);
    const to = path.join(target, entry.path);
    if (entry.kind === 'directory') {
      await mkdir(to);
      continue;
    }
    if (useLinks) {
      try {
        await link(from, to);
        linked += 1;
        continue;
      } catch (error) {
        if (!LINK_FALLBACK.has((error as NodeJS.ErrnoException).code ?? '')) throw error;
      }
    }
    await copyFile(from, to, constants.COPYFILE_FICLONE | constants.COPYFILE_EXCL);
    copied += 1;
  }
  return copied === 0 && linked > 0 ? 'link' : linked === 0 ? 'copy' : 'mixed';
}

/** "61 bytes", "4.2 MB", "25.3 GB" (decimal units, like SHEPHERD_PIN_MAX_GB). */
export function formatBytes(bytes: number): string {
  if (bytes < 1000) return `${bytes} byte${bytes === 1 ? '' : 's'}`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 'bytes';
  for (const next of units) {
    if (value < 1000) break;
    value /= 1000;
    unit = next;
  }
  return `${value.toFixed(1)} ${unit}`;
}
