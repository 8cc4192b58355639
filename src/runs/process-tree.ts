import { readdirSync, readFileSync } from 'node:fs';

/**
 * Descendants of a process from /proc parent links. The launcher is a child subreaper, so while it
 * lives every process its run started — even one that called setsid() and was orphaned — is below it.
 */
export function liveDescendants(rootPid: number): number[] {
  const children = new Map<number, number[]>();
  const zombie = new Set<number>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const pid = Number(entry);
    const parent = Number(fields[1]);
    if (fields[0] === 'Z' || fields[0] === 'X') zombie.add(pid);
    const list = children.get(parent);
    if (list === undefined) children.set(parent, [pid]);
    else list.push(pid);
  }
  const found: number[] = [];
  const pending = [rootPid];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    for (const child of children.get(next) ?? []) {
      pending.push(child);
      if (!zombie.has(child)) found.push(child);
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
