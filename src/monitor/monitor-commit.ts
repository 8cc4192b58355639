import type { Redis } from 'ioredis';
import { LeaseError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Lease } from '../redis/lease.js';
import { MAX_OUTBOX, parseOutbox } from './monitor-outbox.js';
import { type MonitorState, serialiseMonitorState } from './monitor-state.js';
import type { FileCursor } from './tail-reader.js';
import type { Incident } from './types.js';

/**
 * A run's commit: its state, file cursors and new incidents move together in one Lua step, and only while
 * the committer still holds the run's lease (a tick that outlived its lease, or a long hold whose lease was
 * taken over, writes nothing). The lease is released in the same step, or kept (a hold's checkpoint).
 */
const COMMIT_SCRIPT = `if redis.call('get', KEYS[1]) ~= ARGV[1] then return false end
local last = 4 + tonumber(ARGV[3]) * 2
redis.call('hset', KEYS[2], unpack(ARGV, 5, last))
redis.call('persist', KEYS[2])
if #ARGV > last then redis.call('hset', KEYS[3], unpack(ARGV, last + 1)) end
redis.call('persist', KEYS[3])
if ARGV[2] == '1' then redis.call('del', KEYS[1]) else redis.call('pexpire', KEYS[1], ARGV[4]) end
return redis.call('hgetall', KEYS[3])`;

export interface RunCursors {
  metrics?: FileCursor | undefined;
  log?: FileCursor | undefined;
  alerts?: FileCursor | undefined;
}

interface RunKeys {
  lock: string;
  state: string;
  outbox: string;
}

/** Commits and returns the incidents still to deliver; throws `LeaseError` when the lease is not ours. */
export async function commitRun(
  redis: Redis,
  keys: RunKeys,
  lease: Lease,
  input: {
    state: MonitorState;
    cursors: RunCursors;
    incidents: Incident[];
    revision: string;
    release: boolean;
  },
  /** Where an unreadable outbox entry is reported (it is skipped). */
  report?: { logger: Logger | undefined; runId: string },
): Promise<Incident[]> {
  const fields: string[] = ['state', serialiseMonitorState(input.state), 'rev', input.revision];
  const { metrics, log, alerts } = input.cursors;
  if (metrics !== undefined) fields.push('cursor:metrics', JSON.stringify(metrics));
  if (log !== undefined) fields.push('cursor:log', JSON.stringify(log));
  if (alerts !== undefined) fields.push('cursor:alerts', JSON.stringify(alerts));
  const incidentFields = input.incidents.flatMap((incident) => [incident.id, JSON.stringify(incident)]);
  const reply = (await redis.eval(
    COMMIT_SCRIPT,
    3,
    keys.lock,
    keys.state,
    keys.outbox,
    lease.token,
    input.release ? '1' : '0',
    String(fields.length / 2),
    String(lease.ttlMs),
    ...fields,
    ...incidentFields,
  )) as string[] | null;
  if (reply === null) throw new LeaseError(keys.lock, `${keys.lock} was lost before the commit`);
  const outbox: Record<string, string> = {};
  for (let index = 0; index + 1 < reply.length; index += 2)
    outbox[reply[index] as string] = reply[index + 1] as string;
  const incidents = parseOutbox(outbox, report?.logger, report?.runId);
  if (incidents.length > MAX_OUTBOX) {
    // An adapter down for a long time must not make the outbox grow without bound: drop the oldest.
    const dropped = incidents.splice(0, incidents.length - MAX_OUTBOX);
    await redis.hdel(keys.outbox, ...dropped.map((incident) => incident.id));
  }
  return incidents;
}

/**
 * Parsed states kept between a run's leases, each with the revision it was committed at: the next lease
 * reuses it when Redis still holds that revision (the usual case with one worker), else reads the state again.
 * A state is taken out when used, so a hold that goes on changing it never leaves a stale copy behind.
 */
export function createStateCache(maxRuns: number) {
  const cache = new Map<string, { revision: string; state: MonitorState }>();
  return {
    take(runId: string, revision: string | undefined): MonitorState | undefined {
      const cached = cache.get(runId);
      cache.delete(runId);
      return cached !== undefined && revision !== undefined && cached.revision === revision
        ? cached.state
        : undefined;
    },
    put(runId: string, revision: string, state: MonitorState): void {
      cache.set(runId, { revision, state });
      if (cache.size > maxRuns) {
        const oldest = cache.keys().next().value;
        if (oldest !== undefined) cache.delete(oldest);
      }
    },
    delete(runId: string): void {
      cache.delete(runId);
    },
  };
}
