import { execFileSync } from 'node:child_process';
import { lchown, readdir } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../errors.js';

/**
 * `SHEPHERD_RUN_AS_USER`: when the bot runs as root, training processes start as this (unprivileged)
 * user, so user code cannot read the bot's memory, `/proc/<bot>/environ`, its data directory or its
 * secrets files. The run's directory is handed to that user before each launch.
 */
export interface RunUser {
  name: string;
  uid: number;
  gid: number;
  home?: string;
}

/** Looks a user up by name or numeric id (NSS via `getent`, so LDAP users work too). */
export function lookupRunUser(spec: string, currentUid: number | undefined = process.getuid?.()): RunUser {
  let entry: string;
  try {
    entry = execFileSync('getent', ['passwd', spec], { encoding: 'utf8', timeout: 5000 }).trim();
  } catch {
    throw new ConfigError(`SHEPHERD_RUN_AS_USER=${JSON.stringify(spec)}: no such user on this host`);
  }
  const [name = spec, , uidText = '', gidText = '', , home] = (entry.split('\n')[0] ?? '').split(':');
  const uid = Number(uidText);
  const gid = Number(gidText);
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) {
    throw new ConfigError(`SHEPHERD_RUN_AS_USER=${JSON.stringify(spec)}: unreadable passwd entry`);
  }
  if (uid === 0) {
    throw new ConfigError(`SHEPHERD_RUN_AS_USER=${JSON.stringify(spec)}: must not be root`);
  }
  if (currentUid !== undefined && currentUid !== 0 && currentUid !== uid) {
    throw new ConfigError(
      `SHEPHERD_RUN_AS_USER=${JSON.stringify(spec)}: only a bot running as root can start runs as another user (this one runs as uid ${currentUid})`,
    );
  }
  return { name, uid, gid, ...(home ? { home } : {}) };
}

/** Gives a run directory and everything in it to the run's user (symlinks are not followed). */
export async function chownTree(directory: string, user: RunUser): Promise<void> {
  await lchown(directory, user.uid, user.gid);
  for (const entry of await readdir(directory, { withFileTypes: true })) {
    const target = path.join(directory, entry.name);
    if (entry.isDirectory()) await chownTree(target, user);
    else await lchown(target, user.uid, user.gid);
  }
}
