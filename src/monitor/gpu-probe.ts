import { execFile } from 'node:child_process';

/**
 * GPU utilisation from `nvidia-smi` (the command path comes from config, `SHEPHERD_NVIDIA_SMI`; its PATH
 * lookup uses the environment the runs get). Returns utilisation % by GPU index, or undefined when
 * nvidia-smi is missing or fails — then the idle-GPU detector simply has nothing to say. A missing command
 * is remembered for a while so a GPU-less host does not spawn a process every tick.
 */

export type GpuProbe = (indices: readonly number[]) => Promise<number[] | undefined>;

const TIMEOUT_MS = 10_000;
const MISSING_RETRY_MS = 10 * 60_000;

export function parseNvidiaSmi(output: string): Map<number, number> {
  const byIndex = new Map<number, number>();
  for (const line of output.split('\n')) {
    const match = /^\s*(\d+)\s*,\s*([0-9.]+)/.exec(line);
    if (match !== null) byIndex.set(Number(match[1]), Number(match[2]));
  }
  return byIndex;
}

export function createNvidiaSmiProbe(options: {
  command: string;
  environment: Readonly<Record<string, string | undefined>>;
  clock?: () => number;
}): GpuProbe {
  const clock = options.clock ?? Date.now;
  let missingUntil = 0;
  return async (indices) => {
    if (indices.length === 0 || clock() < missingUntil) return undefined;
    const output = await new Promise<string | undefined>((resolve) => {
      execFile(
        options.command,
        ['--query-gpu=index,utilization.gpu', '--format=csv,noheader,nounits'],
        { timeout: TIMEOUT_MS, env: { ...options.environment } as NodeJS.ProcessEnv },
        (error, stdout) => {
          if (error !== null) {
            if ((error as NodeJS.ErrnoException).code === 'ENOENT') missingUntil = clock() + MISSING_RETRY_MS;
            resolve(undefined);
            return;
          }
          resolve(stdout);
        },
      );
    });
    if (output === undefined) return undefined;
    const byIndex = parseNvidiaSmi(output);
    const values = indices.map((index) => byIndex.get(index));
    return values.every((value) => value !== undefined) ? (values as number[]) : undefined;
  };
}
