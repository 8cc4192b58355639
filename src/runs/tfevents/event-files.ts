import type { Dirent } from 'node:fs';
import { open, readdir } from 'node:fs/promises';
import path from 'node:path';
import { decodeEventInto, type ScalarSink } from './event-proto.js';
import { scanRecords } from './tfrecord.js';

/**
 * TensorBoard event files (`events.out.tfevents.*`) under a directory, read incrementally: each file has a
 * cursor (inode and offset of the first byte not yet read), so a tick reads only what is new, like
 * output.log. A torn last record stays unread until it is complete; a corrupt file is read no further.
 */

interface EventFileCursor {
  ino: string;
  offset: number;
  /** Why the file is read no further (a checksum failed). */
  corrupt?: string;
}

/** Relative path (from the searched directory) → cursor. */
export type EventCursors = Record<string, EventFileCursor>;

export interface EventPoint {
  step: number;
  metrics: Record<string, number>;
  /** Set for points read from MLflow's file store (mlflow-store.ts); absent: TensorBoard. */
  source?: 'mlflow';
}

const EVENT_FILE = /^events\.out\.tfevents\./;
/** Folders that hold checkpoints, environments and caches, never a SummaryWriter's log dir. */
const SKIPPED_FOLDERS = new Set(['.shepherd', '.git', 'node_modules', '__pycache__', 'wandb', 'mlruns']);
const MAX_DEPTH = 4;
const MAX_ENTRIES = 5000;

/** Event files under `root` (depth ≤ 4, at most 5000 entries looked at), as paths relative to it. */
async function findEventFiles(root: string): Promise<string[]> {
  const found: string[] = [];
  let budget = MAX_ENTRIES;
  async function walk(relative: string, depth: number): Promise<void> {
    let entries: Dirent[];
    try {
      entries = await readdir(path.join(root, relative), { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      if (--budget < 0) return;
      const child = relative === '' ? entry.name : `${relative}/${entry.name}`;
      if (entry.isFile() && EVENT_FILE.test(entry.name)) found.push(child);
      else if (entry.isDirectory() && depth < MAX_DEPTH && !SKIPPED_FOLDERS.has(entry.name))
        await walk(child, depth + 1);
    }
  }
  await walk('', 0);
  return found.sort();
}

/**
 * Read buffers are reused: a fresh zero-filled 4 MiB buffer per file per tick cost more CPU (page faults,
 * GC) than decoding it. A pool, not one buffer, because ticks of different runs read at the same time.
 */
const bufferPool: Buffer[] = [];
function takeBuffer(size: number): Buffer {
  const index = bufferPool.findIndex((buffer) => buffer.length >= size);
  if (index >= 0) return bufferPool.splice(index, 1)[0] as Buffer;
  return Buffer.allocUnsafeSlow(size);
}
function giveBack(buffer: Buffer): void {
  if (bufferPool.length < 4) bufferPool.push(buffer);
}

/**
 * Collects one event's scalars, kept only when the whole event decoded (a malformed event is skipped, as
 * before), then appended to `points` where consecutive events of one step become one point.
 */
function pointSink(points: EventPoint[]): ScalarSink & { begin(): void; commit(): void } {
  let pendingStep = 0;
  const tags: string[] = [];
  const values: number[] = [];
  return {
    begin() {
      tags.length = 0;
      values.length = 0;
    },
    step(step) {
      pendingStep = step;
    },
    scalar(tag, value) {
      tags.push(tag);
      values.push(value);
    },
    commit() {
      if (tags.length === 0) return;
      let last = points.at(-1);
      if (last === undefined || last.step !== pendingStep) {
        last = { step: pendingStep, metrics: {} };
        points.push(last);
      }
      for (let index = 0; index < tags.length; index++)
        last.metrics[tags[index] as string] = values[index] as number;
    },
  };
}

/** Consecutive events of one step become one point (SummaryWriter writes one event per scalar). */
function appendScalars(points: EventPoint[], step: number, scalars: Array<{ tag: string; value: number }>) {
  let last = points.at(-1);
  if (last === undefined || last.step !== step) {
    last = { step, metrics: {} };
    points.push(last);
  }
  for (const { tag, value } of scalars) last.metrics[tag] = value;
}

/** The new bytes of one file from its cursor, at most `maxBytes`; returns its next cursor. */
async function readFile(
  file: string,
  cursor: EventFileCursor | undefined,
  maxBytes: number,
  points: EventPoint[],
): Promise<{ cursor: EventFileCursor | undefined; more: boolean }> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, 'r');
  } catch {
    return { cursor, more: false };
  }
  try {
    const stats = await handle.stat({ bigint: true });
    const ino = stats.ino.toString();
    const size = Number(stats.size);
    // A replaced or truncated file is read again from its start.
    const start = cursor !== undefined && cursor.ino === ino && cursor.offset <= size ? cursor.offset : 0;
    if (cursor?.corrupt !== undefined && start === cursor.offset) return { cursor, more: false };
    const length = Math.min(size - start, maxBytes);
    if (length <= 0) return { cursor: { ino, offset: start }, more: false };
    const buffer = takeBuffer(length);
    let bytesRead: number;
    let batch: ReturnType<typeof scanRecords>;
    try {
      ({ bytesRead } = await handle.read(buffer, 0, length, start));
      // Records are decoded in place, before the pooled buffer goes back.
      const data = buffer.subarray(0, bytesRead);
      const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
      const sink = pointSink(points);
      batch = scanRecords(data, view, (from, to) => {
        sink.begin();
        if (decodeEventInto(data, view, from, to, sink)) sink.commit();
      });
    } finally {
      giveBack(buffer);
    }
    const next: EventFileCursor = { ino, offset: start + batch.consumed };
    if (batch.corrupt !== undefined) next.corrupt = batch.corrupt;
    // A record longer than the cap would never fit: that file is treated as corrupt from there.
    if (batch.consumed === 0 && bytesRead === maxBytes) next.corrupt = `record longer than ${maxBytes} bytes`;
    // More waits only when the cap cut the read (a torn record at the end is not a backlog).
    return {
      cursor: next,
      more: bytesRead === maxBytes && batch.consumed > 0 && start + batch.consumed < size,
    };
  } finally {
    await handle.close();
  }
}

/**
 * The scalar points new in every event file under `root` since `cursors` (updated in place), at most
 * `maxBytes` per file. `corrupt` names files newly found corrupt (for a log line).
 */
export async function readEventPoints(
  root: string,
  cursors: EventCursors,
  maxBytes: number,
): Promise<{ points: EventPoint[]; more: boolean; corrupt: string[] }> {
  const points: EventPoint[] = [];
  const corrupt: string[] = [];
  let more = false;
  for (const relative of await findEventFiles(root)) {
    const before = cursors[relative];
    const result = await readFile(path.join(root, relative), before, maxBytes, points);
    if (result.cursor === undefined) continue;
    cursors[relative] = result.cursor;
    if (result.cursor.corrupt !== undefined && before?.corrupt === undefined)
      corrupt.push(`${relative}: ${result.cursor.corrupt}`);
    more ||= result.more;
  }
  // Several writers (train/ and eval/ folders) interleave steps: in step order, one point per step.
  if (points.every((point, index) => index === 0 || (points[index - 1] as EventPoint).step < point.step))
    return { points, more, corrupt };
  points.sort((a, b) => a.step - b.step);
  const merged: EventPoint[] = [];
  for (const point of points)
    appendScalars(
      merged,
      point.step,
      Object.entries(point.metrics).map(([tag, value]) => ({ tag, value })),
    );
  return { points: merged, more, corrupt };
}
