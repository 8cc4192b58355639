import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { z } from 'zod';

/** The parts of `autocannon --json` output the benchmarks read. */
const resultSchema = z.object({
  latency: z.object({ p50: z.number(), p90: z.number(), p99: z.number(), average: z.number() }),
  requests: z.object({ average: z.number(), total: z.number() }),
  duration: z.number(),
  errors: z.number(),
  timeouts: z.number(),
  non2xx: z.number(),
  '2xx': z.number(),
});
export type LoadResult = z.infer<typeof resultSchema> & {
  /** 2xx responses per second over the whole run. */
  okPerSecond: number;
};

export interface LoadOptions {
  url: string;
  connections: number;
  durationS: number;
  body: string;
  /** Open-loop offered rate (requests/s over all connections); omit for as-fast-as-possible. */
  overallRate?: number;
}

/**
 * Runs the autocannon CLI as its own process (so the load generator never shares the server's event
 * loop) and returns its parsed JSON summary.
 */
export async function runAutocannon(options: LoadOptions): Promise<LoadResult> {
  const binary = join(process.cwd(), 'node_modules', '.bin', 'autocannon');
  const args = [
    '--json',
    '--no-progress',
    '-c',
    String(options.connections),
    '-d',
    String(options.durationS),
    '-m',
    'POST',
    '-H',
    'content-type=application/json',
    '-b',
    options.body,
  ];
  if (options.overallRate !== undefined)
    args.push('-R', String(Math.max(1, Math.round(options.overallRate))));
  args.push(options.url);
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(binary, args, { maxBuffer: 64 * 1024 * 1024 }, (error, out, err) => {
      if (error) reject(new Error(`autocannon failed: ${error.message}\n${err}`));
      else resolve(out);
    });
  });
  const line = stdout.trim().split('\n').pop() ?? '';
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch {
    throw new Error(`autocannon printed no JSON: ${stdout.slice(0, 500)}`);
  }
  const parsed = resultSchema.parse(raw);
  return { ...parsed, okPerSecond: parsed['2xx'] / parsed.duration };
}
