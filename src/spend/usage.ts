import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { decodeThreadId } from '../bot/chat-adapter.js';
import { RUN_FILES } from '../runs/records/run-files.js';
import { isLaunched, type RunMeta, type RunStatus } from '../runs/records/run-types.js';
import { parseJsonWith } from '../text/json.js';

/**
 * GPU time from the runs' real durations: every stretch a run spent `running` (its audit trail, one line
 * per transition), clipped to a window, times its GPUs. A run still running counts up to now.
 */

interface RunUsage {
  meta: RunMeta;
  /** Running time inside the window, in hours. */
  hours: number;
  gpuHours: number;
  usd: number;
  /** First time it started running, if inside the window. */
  startedInWindow: boolean;
  /** Ended (completed / failed / stopped) inside the window. */
  endedInWindow: boolean;
}

interface Window {
  from: Date;
  to: Date;
}

/** What spend reads of an audit entry: when a run changed state, and to what. */
const auditTransition = z.object({ ts: z.string(), to: z.string() });
type AuditTransition = z.output<typeof auditTransition>;

async function readAudit(runDir: string): Promise<AuditTransition[]> {
  let text: string;
  try {
    text = await readFile(join(runDir, RUN_FILES.audit), 'utf8');
  } catch {
    return [];
  }
  const entries: AuditTransition[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    // A torn last line, or one of another shape, is skipped.
    const entry = parseJsonWith(auditTransition, line);
    if (entry !== undefined) entries.push(entry);
  }
  return entries;
}

/** Stretches spent running, as [start, end] epoch ms; an open one ends at `now`. */
export function runningIntervals(
  entries: AuditTransition[],
  meta: RunMeta,
  now: Date,
): Array<[number, number]> {
  const intervals: Array<[number, number]> = [];
  let openedAt: number | undefined;
  for (const entry of entries) {
    const at = Date.parse(entry.ts);
    if (!Number.isFinite(at)) continue;
    // An evaluation holds the run's GPUs too: running → evaluating does not end the stretch.
    if (isLaunched(entry.to as RunStatus) && openedAt === undefined) openedAt = at;
    else if (!isLaunched(entry.to as RunStatus) && openedAt !== undefined) {
      intervals.push([openedAt, at]);
      openedAt = undefined;
    }
  }
  if (openedAt !== undefined) {
    const end = isLaunched(meta.status) ? now.getTime() : Date.parse(meta.endedAt ?? meta.updatedAt);
    intervals.push([openedAt, Math.max(openedAt, end)]);
  }
  if (intervals.length === 0 && meta.startedAt !== undefined && entries.length === 0) {
    // No audit trail (an old run): fall back to its first start and its end.
    const end = meta.endedAt === undefined ? now.getTime() : Date.parse(meta.endedAt);
    intervals.push([Date.parse(meta.startedAt), end]);
  }
  return intervals;
}

export async function usageOf(
  runs: RunMeta[],
  runDir: (runId: string) => string,
  window: Window,
  gpuHourUsd: number,
  clock: () => Date = () => new Date(),
): Promise<RunUsage[]> {
  const from = window.from.getTime();
  const to = window.to.getTime();
  const usages: RunUsage[] = [];
  for (const meta of runs) {
    const entries = await readAudit(runDir(meta.id));
    // A run still running has run until now, not until a later report time (a digest for tomorrow).
    const until = new Date(Math.min(window.to.getTime(), clock().getTime()));
    const intervals = runningIntervals(entries, meta, until);
    let milliseconds = 0;
    for (const [start, end] of intervals)
      milliseconds += Math.max(0, Math.min(end, to) - Math.max(start, from));
    const hours = milliseconds / 3_600_000;
    const firstStart = intervals[0]?.[0];
    const ended =
      meta.endedAt !== undefined && ['completed', 'failed', 'stopped'].includes(meta.status)
        ? Date.parse(meta.endedAt)
        : undefined;
    usages.push({
      meta,
      hours,
      gpuHours: hours * meta.gpus,
      // A run priced by its backend (an HF flavour, a per-backend GPU-hour price) keeps that price.
      usd: hours * (meta.hourlyUsd ?? meta.gpus * gpuHourUsd),
      startedInWindow: firstStart !== undefined && firstStart >= from && firstStart <= to,
      endedInWindow: ended !== undefined && ended >= from && ended <= to,
    });
  }
  return usages;
}

function channelOf(threadId: string): string {
  try {
    const reference = decodeThreadId(threadId);
    return `${reference.platform}:${reference.channel}`;
  } catch {
    return threadId;
  }
}

interface SpendGroup {
  key: string;
  runs: number;
  gpuHours: number;
  usd: number;
}

export function groupUsage(usages: RunUsage[], by: 'person' | 'channel'): SpendGroup[] {
  const groups = new Map<string, SpendGroup>();
  for (const usage of usages) {
    if (usage.hours <= 0) continue;
    const key = by === 'person' ? usage.meta.requester.name : channelOf(usage.meta.threadId);
    const group = groups.get(key) ?? { key, runs: 0, gpuHours: 0, usd: 0 };
    group.runs += 1;
    group.gpuHours += usage.gpuHours;
    group.usd += usage.usd;
    groups.set(key, group);
  }
  return [...groups.values()].sort(
    (left, right) => right.usd - left.usd || left.key.localeCompare(right.key),
  );
}

export function formatGpuHours(value: number): string {
  if (value === 0) return '0';
  return value >= 10 ? value.toFixed(1) : value >= 0.01 ? value.toFixed(2) : value.toPrecision(2);
}

export function formatDollars(value: number): string {
  return `$${value.toFixed(2)}`;
}

export function startOfMonthUtc(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
}

/** A plain-text table (monospace in a code block on every platform). */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((header, column) =>
    Math.max(header.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => cell.padEnd(widths[column] ?? 0))
      .join('  ')
      .trimEnd();
  return [
    '```',
    line(headers),
    line(widths.map((width) => '-'.repeat(width))),
    ...rows.map(line),
    '```',
  ].join('\n');
}
