import { execFile } from 'node:child_process';
import type { Logger } from '../logger.js';

export interface GpuInfo {
  index: number;
  name: string;
  memoryMb?: number;
}

/** Parse `nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits`. */
export function parseNvidiaSmi(output: string): GpuInfo[] {
  const gpus: GpuInfo[] = [];
  for (const line of output.split('\n')) {
    const parts = line.split(',').map((part) => part.trim());
    const [index, name, memory] = parts;
    if (index === undefined || !/^\d+$/.test(index) || name === undefined) continue;
    const gpu: GpuInfo = { index: Number(index), name };
    if (memory !== undefined && /^\d+(\.\d+)?$/.test(memory)) gpu.memoryMb = Number(memory);
    gpus.push(gpu);
  }
  return gpus;
}

/**
 * The GPUs this host offers. `SHEPHERD_GPUS` (already parsed into indices by config) wins when set, so a
 * team can reserve a subset and tests/CPU hosts can declare GPUs; otherwise `nvidia-smi`; else none.
 */
export async function detectGpus(options: {
  configured: readonly number[] | undefined;
  logger: Logger;
  nvidiaSmi?: string;
}): Promise<GpuInfo[]> {
  if (options.configured !== undefined) {
    return options.configured.map((index) => ({ index, name: 'declared by SHEPHERD_GPUS' }));
  }
  const binary = options.nvidiaSmi ?? 'nvidia-smi';
  const output = await new Promise<string | undefined>((resolve) => {
    execFile(
      binary,
      ['--query-gpu=index,name,memory.total', '--format=csv,noheader,nounits'],
      { timeout: 10_000 },
      (error, stdout) => {
        if (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
            options.logger.warn({ err: error }, 'nvidia-smi failed; assuming no GPUs');
          }
          resolve(undefined);
          return;
        }
        resolve(stdout);
      },
    );
  });
  return output === undefined ? [] : parseNvidiaSmi(output);
}
