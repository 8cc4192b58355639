import { readdirSync, readFileSync } from 'node:fs';

/**
 * Linux process facts from /proc, used to re-attach to runs after a restart without trusting a bare
 * pid (pids are reused) and to see whether any member of a run's process group is still alive.
 */

export interface ProcessStat {
  state: string;
  pgid: number;
  /** Field 22 of /proc/<pid>/stat: start time in clock ticks since boot. */
  startTime: string;
}

/** Parse one /proc/<pid>/stat line; the command name may contain spaces and parentheses. */
export function parseProcStat(text: string): ProcessStat | undefined {
  const close = text.lastIndexOf(')');
  if (close < 0) return undefined;
  // Fields after the name: state(3) ppid(4) pgrp(5) … starttime(22).
  const fields = text
    .slice(close + 2)
    .trim()
    .split(/\s+/);
  const state = fields[0];
  const pgid = fields[2];
  const startTime = fields[19];
  if (state === undefined || pgid === undefined || startTime === undefined) return undefined;
  return { state, pgid: Number(pgid), startTime };
}

export function hasProcFs(): boolean {
  try {
    readFileSync('/proc/self/stat', 'utf8');
    return true;
  } catch {
    return false;
  }
}

export function readProcessStat(pid: number): ProcessStat | undefined {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Process group ids that have at least one live (non-zombie) member. */
export function liveProcessGroups(): Set<number> {
  const groups = new Set<number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readProcessStat(Number(entry));
    if (stat !== undefined && stat.state !== 'Z' && stat.state !== 'X') groups.add(stat.pgid);
  }
  return groups;
}

/** Without /proc (macOS dev machines): signal 0 to the group tells whether any member exists. */
export function groupExistsBySignal(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
