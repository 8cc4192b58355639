import type { Redis } from 'ioredis';

/**
 * GPU allocation in one Redis hash (gpu index → run id). Each change is a Lua script, so two processes
 * allocating at once can never hand the same GPU to two runs.
 */

// KEYS[1] owners hash; ARGV[1] run id; ARGV[2] count; ARGV[3..] inventory indices in preference order.
// Returns the granted indices, or {-1, free count}. Idempotent: a run that already holds GPUs gets them back.
const ALLOCATE_SCRIPT = `
local owners = redis.call('HGETALL', KEYS[1])
local taken = {}
local mine = {}
for i = 1, #owners, 2 do
  taken[owners[i]] = owners[i + 1]
  if owners[i + 1] == ARGV[1] then table.insert(mine, tonumber(owners[i])) end
end
local count = tonumber(ARGV[2])
if #mine > 0 then return mine end
local free = {}
for i = 3, #ARGV do
  if taken[ARGV[i]] == nil then table.insert(free, ARGV[i]) end
end
if #free < count then return {-1, #free} end
local granted = {}
for i = 1, count do
  redis.call('HSET', KEYS[1], free[i], ARGV[1])
  table.insert(granted, tonumber(free[i]))
end
return granted
`;

const RELEASE_SCRIPT = `
local owners = redis.call('HGETALL', KEYS[1])
local released = 0
for i = 1, #owners, 2 do
  if owners[i + 1] == ARGV[1] then
    redis.call('HDEL', KEYS[1], owners[i])
    released = released + 1
  end
end
return released
`;

type AllocationResult = { ok: true; indices: number[] } | { ok: false; free: number };

export interface GpuAllocator {
  /** Inventory indices this allocator hands out. */
  readonly inventory: readonly number[];
  allocate(runId: string, count: number): Promise<AllocationResult>;
  /** Free every GPU held by the run; returns how many were freed. */
  release(runId: string): Promise<number>;
  /** gpu index → run id for every held GPU. */
  owners(): Promise<Map<number, string>>;
  freeCount(): Promise<number>;
}

/** The hash of GPU index → owning run. */
const gpuOwnersKey = (prefix: string) => `${prefix}:gpu-owners`;

export function createGpuAllocator(options: {
  redis: Redis;
  prefix: string;
  inventory: readonly number[];
}): GpuAllocator {
  const key = gpuOwnersKey(options.prefix);
  const inventory = [...options.inventory];

  async function allocate(runId: string, count: number): Promise<AllocationResult> {
    if (count <= 0) return { ok: true, indices: [] };
    const result = (await options.redis.eval(
      ALLOCATE_SCRIPT,
      1,
      key,
      runId,
      String(count),
      ...inventory.map(String),
    )) as number[];
    if (result[0] === -1) return { ok: false, free: result[1] ?? 0 };
    return { ok: true, indices: result.map(Number).sort((a, b) => a - b) };
  }

  async function release(runId: string): Promise<number> {
    return Number(await options.redis.eval(RELEASE_SCRIPT, 1, key, runId));
  }

  async function owners(): Promise<Map<number, string>> {
    const raw = await options.redis.hgetall(key);
    return new Map(Object.entries(raw).map(([index, runId]) => [Number(index), runId]));
  }

  async function freeCount(): Promise<number> {
    const held = await owners();
    return inventory.filter((index) => !held.has(index)).length;
  }

  return { inventory, allocate, release, owners, freeCount };
}
