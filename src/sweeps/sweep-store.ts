import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { LeaseError, RunError } from '../errors.js';
import { createLeases } from '../redis/lease.js';

/**
 * Sweeps live in Redis (one JSON record each, a name index and the set of sweeps still in progress), so
 * a restart picks the orchestration up where it was: the periodic `run-schedule` job reads them back.
 */

const userSchema = z.object({ id: z.string(), name: z.string() });

const LOCK_TTL_MS = 30_000;
const LOCK_WAIT_MS = 60_000;

const TRIAL_STATES = ['waiting', 'launched', 'ended'] as const;

const trialSchema = z.object({
  index: z.number().int().nonnegative(),
  name: z.string(),
  values: z.record(z.string(), z.union([z.number(), z.string()])),
  runId: z.string(),
  /** `waiting`: approved but not launched; `launched`: handed to the run queue; `ended`: final. */
  state: z.enum(TRIAL_STATES),
  /** Why a trial ended early ("NaN at step 12"); a trial with it counts as stopped early. */
  stoppedEarly: z.string().optional(),
  /** Final run status once ended. */
  outcome: z.string().optional(),
});
export type Trial = z.infer<typeof trialSchema>;

const SWEEP_STATES = [
  'pending_approval',
  'canary',
  'running',
  'paused',
  'completed',
  'failed',
  'stopped',
  'rejected',
] as const;
type SweepState = (typeof SWEEP_STATES)[number];
export const FINAL_SWEEP_STATES: ReadonlySet<SweepState> = new Set([
  'completed',
  'failed',
  'stopped',
  'rejected',
]);

const sweepSchema = z.object({
  schemaVersion: z.literal(1),
  id: z.string(),
  name: z.string(),
  threadId: z.string(),
  requester: userSchema,
  script: z.string(),
  gpus: z.number().int().nonnegative(),
  maxHours: z.number().positive(),
  metric: z.string(),
  mode: z.enum(['min', 'max']),
  canarySteps: z.number().int().positive(),
  /** Trials running at once; 0 means as many as the GPU queue allows. */
  parallel: z.number().int().nonnegative(),
  state: z.enum(SWEEP_STATES),
  reason: z.string().optional(),
  /** The phase a paused sweep goes back to on resume. */
  pausedFrom: z.enum(['canary', 'running']).optional(),
  approvalId: z.string().optional(),
  trials: z.array(trialSchema),
  createdAt: z.string(),
  updatedAt: z.string(),
  /** Set once the final leaderboard is posted, so it is posted once. */
  reportedAt: z.string().optional(),
});
export type Sweep = z.infer<typeof sweepSchema>;

export interface SweepStore {
  create(input: Omit<Sweep, 'schemaVersion' | 'id' | 'createdAt' | 'updatedAt'>, now: Date): Promise<Sweep>;
  get(id: string): Promise<Sweep | undefined>;
  /** By id or name. */
  find(reference: string): Promise<Sweep | undefined>;
  /** The sweep a run belongs to, if any. */
  sweepOfRun(runId: string): Promise<string | undefined>;
  /** Sweeps not yet final. */
  active(): Promise<Sweep[]>;
  /** Read-modify-write under a short Redis lock; `change` returns the new record (or undefined: no write). */
  update(
    id: string,
    change: (sweep: Sweep) => Sweep | undefined | Promise<Sweep | undefined>,
  ): Promise<Sweep>;
  /** Gives the sweep a new name (its card's Edit): the new name is claimed, the old one freed. */
  rename(id: string, name: string): Promise<Sweep>;
  /** Reserves trial run ids ahead of their creation. */
  linkRun(runId: string, sweepId: string): Promise<void>;
}

export function createSweepStore(options: { redis: Redis; prefix: string; now?: () => Date }): SweepStore {
  const { redis, prefix } = options;
  const now = options.now ?? (() => new Date());
  const key = (id: string) => `${prefix}:sweep:${id}`;
  const nameKey = (name: string) => `${prefix}:sweep-name:${name.toLowerCase()}`;
  const runKey = (runId: string) => `${prefix}:sweep-run:${runId}`;
  const activeKey = `${prefix}:sweeps-active`;
  const lockKey = (id: string) => `${prefix}:sweep-lock:${id}`;
  const leases = createLeases(redis);

  async function get(id: string): Promise<Sweep | undefined> {
    const raw = await redis.get(key(id));
    if (raw === null) return undefined;
    try {
      const parsed = sweepSchema.safeParse(JSON.parse(raw));
      return parsed.success ? parsed.data : undefined;
    } catch {
      return undefined;
    }
  }

  async function write(sweep: Sweep): Promise<void> {
    const multi = redis.multi().set(key(sweep.id), JSON.stringify(sweep));
    if (FINAL_SWEEP_STATES.has(sweep.state) && sweep.reportedAt !== undefined)
      multi.srem(activeKey, sweep.id);
    else multi.sadd(activeKey, sweep.id);
    await multi.exec();
  }

  /** One update at a time per sweep; a change that waits a minute for the lease gives up as `busy`. */
  async function withLock<T>(id: string, work: () => Promise<T>): Promise<T> {
    try {
      return await leases.withLease(lockKey(id), LOCK_TTL_MS, () => work(), {
        waitMs: LOCK_WAIT_MS,
        renew: false,
      });
    } catch (error) {
      if (error instanceof LeaseError && error.key === lockKey(id)) {
        throw new RunError('busy', `sweep ${id} is busy; try again`, { cause: error });
      }
      throw error;
    }
  }

  return {
    async create(input, at) {
      const id = `sw_${randomBytes(5).toString('hex')}`;
      const claimed = await redis.set(nameKey(input.name), id, 'NX');
      if (claimed !== 'OK') {
        throw new RunError('name_taken', `a sweep named ${input.name} already exists; pick another --name`);
      }
      const sweep: Sweep = {
        ...input,
        schemaVersion: 1,
        id,
        createdAt: at.toISOString(),
        updatedAt: at.toISOString(),
      };
      for (const trial of sweep.trials) await redis.set(runKey(trial.runId), id);
      await write(sweep);
      return sweep;
    },
    get,
    async find(reference) {
      if (reference.startsWith('sw_')) {
        const byId = await get(reference);
        if (byId !== undefined) return byId;
      }
      const id = await redis.get(nameKey(reference));
      return id === null ? undefined : get(id);
    },
    async sweepOfRun(runId) {
      return (await redis.get(runKey(runId))) ?? undefined;
    },
    async active() {
      const ids = await redis.smembers(activeKey);
      const sweeps = await Promise.all(ids.map((id) => get(id)));
      return sweeps.filter((sweep): sweep is Sweep => sweep !== undefined);
    },
    update(id, change) {
      return withLock(id, async () => {
        const current = await get(id);
        if (current === undefined) throw new RunError('run_not_found', `no sweep ${id}`);
        const next = await change(current);
        if (next === undefined) return current;
        const stamped = { ...next, updatedAt: now().toISOString() };
        await write(stamped);
        return stamped;
      });
    },
    rename(id, name) {
      return withLock(id, async () => {
        const current = await get(id);
        if (current === undefined) throw new RunError('run_not_found', `no sweep ${id}`);
        if (current.name === name) return current;
        const claimed = await redis.set(nameKey(name), id, 'NX');
        if (claimed !== 'OK' && (await redis.get(nameKey(name))) !== id)
          throw new RunError('name_taken', `a sweep named ${name} already exists; pick another name`);
        if (current.name.toLowerCase() !== name.toLowerCase()) await redis.del(nameKey(current.name));
        const renamed = { ...current, name, updatedAt: now().toISOString() };
        await write(renamed);
        return renamed;
      });
    },
    async linkRun(runId, sweepId) {
      await redis.set(runKey(runId), sweepId);
    },
  };
}
