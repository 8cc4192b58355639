import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createGpuAllocator } from '../../src/runs/gpu-allocator.js';
import { parseNvidiaSmi } from '../../src/runs/gpu-inventory.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const connections: Redis[] = [];
const prefixes: string[] = [];
afterEach(async () => {
  for (const connection of connections.splice(0)) connection.disconnect();
  for (const prefix of prefixes.splice(0)) await deleteKeysWithPrefix(prefix);
});

function allocatorOn(prefix: string, inventory: number[]) {
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  connections.push(redis);
  return createGpuAllocator({ redis, prefix, inventory });
}

describe('gpu allocator', () => {
  it('never gives one GPU to two runs under many concurrent allocations', async () => {
    const prefix = uniquePrefix('gpu');
    prefixes.push(prefix);
    const inventory = [0, 1, 2, 3, 4, 5, 6, 7];
    // Four independent connections, as if from four processes.
    const allocators = Array.from({ length: 4 }, () => allocatorOn(prefix, inventory));
    const requests = Array.from({ length: 60 }, (_, index) => ({
      runId: `run-${index}`,
      count: 1 + (index % 3),
    }));
    const results = await Promise.all(
      requests.map((request, index) => allocators[index % 4]?.allocate(request.runId, request.count)),
    );
    const granted = new Map<number, string>();
    let grantedTotal = 0;
    results.forEach((result, index) => {
      const request = requests[index];
      if (result === undefined || request === undefined) throw new Error('missing result');
      if (!result.ok) return;
      expect(result.indices).toHaveLength(request.count);
      for (const gpu of result.indices) {
        expect(granted.has(gpu)).toBe(false);
        granted.set(gpu, request.runId);
      }
      grantedTotal += result.indices.length;
    });
    expect(grantedTotal).toBeLessThanOrEqual(8);
    const owners = await allocators[0]?.owners();
    expect(owners).toEqual(granted);
    // Whatever is left is too small for every refused request at the moment it was refused.
    expect(results.some((result) => result?.ok === false)).toBe(true);
  });

  it('reports free GPUs when refusing, releases, and is idempotent per run', async () => {
    const prefix = uniquePrefix('gpu');
    prefixes.push(prefix);
    const allocator = allocatorOn(prefix, [0, 2, 3, 5]);
    expect(await allocator.allocate('a', 3)).toEqual({ ok: true, indices: [0, 2, 3] });
    expect(await allocator.allocate('a', 3)).toEqual({ ok: true, indices: [0, 2, 3] });
    expect(await allocator.allocate('b', 2)).toEqual({ ok: false, free: 1 });
    expect(await allocator.allocate('c', 0)).toEqual({ ok: true, indices: [] });
    expect(await allocator.release('a')).toBe(3);
    expect(await allocator.release('a')).toBe(0);
    expect(await allocator.allocate('b', 2)).toEqual({ ok: true, indices: [0, 2] });
    expect(await allocator.freeCount()).toBe(2);
  });

  it('parses nvidia-smi output', () => {
    expect(parseNvidiaSmi('0, NVIDIA A100-SXM4-80GB, 81920\n1, NVIDIA A100-SXM4-80GB, 81920\n')).toEqual([
      { index: 0, name: 'NVIDIA A100-SXM4-80GB', memoryMb: 81920 },
      { index: 1, name: 'NVIDIA A100-SXM4-80GB', memoryMb: 81920 },
    ]);
    expect(parseNvidiaSmi('No devices were found\n')).toEqual([]);
  });
});
