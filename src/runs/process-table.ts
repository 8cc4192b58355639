import { readdirSync, readFileSync } from 'node:fs';

/**
 * Linux process facts from /proc, used to re-attach to runs after a restart without trusting a bare
 * pid (pids are reused) and to see whether any member of a run's process group is still alive.
 */

interface ProcessStat {
  state: string;
  /** Parent pid (field 4). */
  ppid: number;
  pgid: number;
  /** Field 22 of /proc/<pid>/stat: start time in clock ticks since boot. */
  startTime: string;
}

/** Parse one /proc/<pid>/stat line; the command name may contain spaces and parentheses. */
function parseProcStat(text: string): ProcessStat | undefined {
  const close = text.lastIndexOf(')');
  if (close < 0) return undefined;
  // Fields after the name: state(3) ppid(4) pgrp(5) … starttime(22).
  const fields = text
    .slice(close + 2)
    .trim()
    .split(/\s+/);
  const state = fields[0];
  const ppid = fields[1];
  const pgid = fields[2];
  const startTime = fields[19];
  if (state === undefined || ppid === undefined || pgid === undefined || startTime === undefined)
    return undefined;
  return { state, ppid: Number(ppid), pgid: Number(pgid), startTime };
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

const isLive = (stat: ProcessStat) => stat.state !== 'Z' && stat.state !== 'X';

/** Every process in /proc with its stat (processes that vanish meanwhile are left out). */
function allProcesses(): Array<{ pid: number; stat: ProcessStat }> {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const found: Array<{ pid: number; stat: ProcessStat }> = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readProcessStat(Number(entry));
    if (stat !== undefined) found.push({ pid: Number(entry), stat });
  }
  return found;
}

/** Process group ids that have at least one live (non-zombie) member. */
export function liveProcessGroups(): Set<number> {
  const groups = new Set<number>();
  for (const { stat } of allProcesses()) if (isLive(stat)) groups.add(stat.pgid);
  return groups;
}

/** Live members of a process group except its leader (the run's launcher), oldest pid first. */
export function processGroupMembers(pgid: number): number[] {
  return allProcesses()
    .filter(({ pid, stat }) => stat.pgid === pgid && pid !== pgid && isLive(stat))
    .map(({ pid }) => pid)
    .sort((a, b) => a - b);
}

/**
 * Live descendants of a process from /proc parent links. The launcher is a child subreaper, so while it
 * lives every process its run started — even one that called setsid() and was orphaned — is below it.
 */
function liveDescendants(rootPid: number): number[] {
  const children = new Map<number, Array<{ pid: number; stat: ProcessStat }>>();
  for (const entry of allProcesses()) {
    const list = children.get(entry.stat.ppid);
    if (list === undefined) children.set(entry.stat.ppid, [entry]);
    else list.push(entry);
  }
  const found: number[] = [];
  const pending = [rootPid];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    for (const child of children.get(next) ?? []) {
      pending.push(child.pid);
      if (isLive(child.stat)) found.push(child.pid);
    }
  }
  return found;
}

/** SIGKILL a process's whole subtree (not the process itself), again while new orphans turn up. */
export async function killDescendants(rootPid: number, rounds = 20): Promise<void> {
  for (let round = 0; round < rounds; round += 1) {
    const left = liveDescendants(rootPid);
    if (left.length === 0) return;
    for (const pid of left) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
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
