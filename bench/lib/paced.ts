import { z } from 'zod';
import { runNodeScript } from './processes.js';

const pacedResultSchema = z.object({
  sent: z.number(),
  ok: z.number(),
  failed: z.number(),
  elapsedS: z.number(),
  p50: z.number(),
  p90: z.number(),
  p99: z.number(),
  max: z.number(),
  /** The generator's own lateness in sending (p99, max), ms: large values mean it was starved of CPU. */
  sendLagP99: z.number(),
  sendLagMax: z.number(),
  /** 100 ms windows of scheduled sends, and how many of them held a request slower than 50 ms. */
  windows: z.number(),
  slowWindows: z.number(),
  /** Every latency, sorted (ms), when asked for with `raw`. */
  latencies: z.array(z.number()).optional(),
});
export type PacedResult = z.infer<typeof pacedResultSchema>;

export interface PacedOptions {
  url: string;
  body: string;
  /** Offered requests per second, spread evenly. */
  rate: number;
  connections: number;
  durationS: number;
  raw?: boolean;
}

/** Runs bench/lib/paced-load.ts in its own process and returns its latency summary (ms). */
export async function runPacedLoad(options: PacedOptions): Promise<PacedResult> {
  const stdout = await runNodeScript(
    'bench/lib/paced-load.ts',
    JSON.stringify(options),
    (options.durationS + 60) * 1000,
  );
  const line = stdout.trim().split('\n').pop() ?? '';
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch {
    throw new Error(`paced load printed no JSON: ${stdout.slice(0, 500)}`);
  }
  return pacedResultSchema.parse(raw);
}
