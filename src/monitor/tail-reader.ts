import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs';
import { open, stat } from 'node:fs/promises';

/**
 * Incremental reader of an append-only text file. Each call reads at most `maxBytes` from the saved byte
 * offset, so the cost of a tick depends on what is new, never on the file's size. Only complete lines
 * (ending in `\n`) are returned; a half-written last line stays for the next call. The file's identity
 * (inode) and the offset detect replacement or truncation, after which it is read again from 0.
 */

/** Where a file has been read up to. Persist it only after the returned lines were processed. */
export interface FileCursor {
  /** Inode (as a string, inodes can exceed 2^53 on some filesystems). */
  ino: string;
  offset: number;
}

export interface TailChunk {
  lines: string[];
  /** The cursor to commit once `lines` are processed. Undefined when the file does not exist. */
  cursor: FileCursor | undefined;
  /** True when the file was replaced or truncated since the previous cursor (read again from 0). */
  reset: boolean;
  /** True when more complete data is waiting (the per-call byte cap was hit). */
  more: boolean;
  /** Lines longer than the cap that were skipped unread. */
  oversized: number;
  bytesRead: number;
}

export const DEFAULT_MAX_BYTES_PER_READ = 4 * 1024 * 1024;

/** A read that found nothing new: the cursor stays where it was. */
export function nothingNew(cursor: FileCursor | undefined): TailChunk {
  return { lines: [], cursor, reset: false, more: false, oversized: 0, bytesRead: 0 };
}

interface ReadLinesOptions {
  /** Also end a read after the last `\r` (output.log), so in-place progress updates are seen promptly. */
  carriageReturns?: boolean;
}

/** Read the complete lines appended after `cursor`. Pure file I/O; the caller owns the cursor. */
export async function readNewLines(
  path: string,
  cursor: FileCursor | undefined,
  maxBytes: number = DEFAULT_MAX_BYTES_PER_READ,
  options: ReadLinesOptions = {},
): Promise<TailChunk> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return nothingNew(cursor);
    throw error;
  }
  try {
    // bigint stats: inodes on XFS/NFS can exceed Number.MAX_SAFE_INTEGER.
    const stats = await handle.stat({ bigint: true });
    const ino = stats.ino.toString();
    const size = Number(stats.size);
    let offset = cursor?.offset ?? 0;
    let reset = false;
    if (cursor !== undefined && (cursor.ino !== ino || size < cursor.offset)) {
      offset = 0;
      reset = true;
    }
    const available = size - offset;
    if (available <= 0) {
      return { ...nothingNew({ ino, offset }), reset };
    }
    const length = Math.min(available, maxBytes);
    const buffer = Buffer.allocUnsafe(length);
    const { bytesRead } = await handle.read(buffer, 0, length, offset);
    return chunkOf(buffer, bytesRead, { ino, offset, size, reset, maxBytes }, options);
  } finally {
    await handle.close();
  }
}

/** The complete lines of what was read at `at.offset` (the half-written last line stays unread). */
function chunkOf(
  buffer: Buffer,
  bytesRead: number,
  at: { ino: string; offset: number; size: number; reset: boolean; maxBytes: number },
  options: ReadLinesOptions,
): TailChunk {
  const { ino, offset, size, reset, maxBytes } = at;
  // 0x0A never occurs inside a multi-byte UTF-8 sequence, so cutting after it is always safe.
  let lastNewline = buffer.lastIndexOf(0x0a, bytesRead - 1);
  // A progress bar redraws itself with `\r` and may not print `\n` for minutes: cut after its last update.
  if (options.carriageReturns === true)
    lastNewline = Math.max(lastNewline, buffer.lastIndexOf(0x0d, bytesRead - 1));
  if (lastNewline === -1) {
    if (bytesRead >= maxBytes) {
      // One line longer than the whole cap: skip it rather than stall forever.
      return {
        lines: [],
        cursor: { ino, offset: offset + bytesRead },
        reset,
        more: true,
        oversized: 1,
        bytesRead,
      };
    }
    return { lines: [], cursor: { ino, offset }, reset, more: false, oversized: 0, bytesRead };
  }
  const text = buffer.toString('utf8', 0, lastNewline);
  const lines = text.split('\n');
  const consumed = lastNewline + 1;
  return {
    lines,
    cursor: { ino, offset: offset + consumed },
    reset,
    more: offset + consumed < size && size - (offset + consumed) > 0 && bytesRead >= maxBytes,
    oversized: 0,
    bytesRead: consumed,
  };
}

/**
 * `readNewLines` with synchronous calls, for a woken evaluation: the file is local (its watch just fired) and
 * a few hundred new bytes cost microseconds to read this way, where each promise call costs tens. A file
 * that is not there (yet) reads as nothing new; its size is checked before anything is opened.
 */
export function readNewLinesSync(
  path: string,
  cursor: FileCursor | undefined,
  maxBytes: number = DEFAULT_MAX_BYTES_PER_READ,
  options: ReadLinesOptions = {},
): TailChunk {
  const nothing = nothingNew(cursor);
  const quick = statSync(path, { throwIfNoEntry: false });
  // The same file at the same size: nothing new, nothing opened (a wake-up for another file of the run).
  if (
    quick === undefined ||
    (cursor !== undefined && quick.size === cursor.offset && String(quick.ino) === cursor.ino)
  )
    return nothing;
  const descriptor = openSync(path, 'r');
  try {
    // Stats of what was opened (not of the path a moment ago), bigint as in `readNewLines`.
    const stats = fstatSync(descriptor, { bigint: true });
    const ino = stats.ino.toString();
    const size = Number(stats.size);
    let offset = cursor?.offset ?? 0;
    let reset = false;
    if (cursor !== undefined && (cursor.ino !== ino || size < cursor.offset)) {
      offset = 0;
      reset = true;
    }
    const available = size - offset;
    if (available <= 0) return { ...nothing, cursor: { ino, offset }, reset };
    const length = Math.min(available, maxBytes);
    const buffer = Buffer.allocUnsafe(length);
    const bytesRead = readSync(descriptor, buffer, 0, length, offset);
    return chunkOf(buffer, bytesRead, { ino, offset, size, reset, maxBytes }, options);
  } finally {
    closeSync(descriptor);
  }
}

/** Read the last `maxBytes` of a file (for the traceback of a crashed run). Empty when it is missing. */
export async function readFileTail(path: string, maxBytes: number): Promise<string> {
  let size: number;
  try {
    size = (await stat(path)).size;
  } catch {
    return '';
  }
  const handle = await open(path, 'r');
  try {
    const start = Math.max(0, size - maxBytes);
    const buffer = Buffer.allocUnsafe(size - start);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, start);
    let text = buffer.toString('utf8', 0, bytesRead);
    // Drop a partial first line (and a possibly cut multi-byte character) when we started mid-file.
    if (start > 0) text = text.slice(text.indexOf('\n') + 1);
    return text;
  } finally {
    await handle.close();
  }
}

/** Parse a stored cursor; anything unreadable means "start from 0". */
export function parseCursor(raw: string | null | undefined): FileCursor | undefined {
  if (raw === null || raw === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(raw);
    if (
      typeof value === 'object' &&
      value !== null &&
      typeof (value as FileCursor).ino === 'string' &&
      typeof (value as FileCursor).offset === 'number'
    ) {
      return { ino: (value as FileCursor).ino, offset: (value as FileCursor).offset };
    }
  } catch {
    // fall through
  }
  return undefined;
}
