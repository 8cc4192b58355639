import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PlaygroundMessage } from './app-harness.js';

/** Messages whose card title contains `titlePart`, in thread order. */
export function cardsTitled(messages: PlaygroundMessage[], titlePart: string): PlaygroundMessage[] {
  return messages.filter((message) => message.card?.title?.includes(titlePart));
}

/** The steps logged to a run's metrics.jsonl, in file order. */
export function metricSteps(dataDir: string, runId: string): number[] {
  const path = join(dataDir, 'runs', runId, 'metrics.jsonl');
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => Number((JSON.parse(line) as { step: number }).step));
}

/** Fetches a playground file URL and returns whether it is served as a PNG with a PNG signature. */
export async function fetchesPng(baseUrl: string, url: string | undefined): Promise<boolean> {
  if (url === undefined) return false;
  const response = await fetch(`${baseUrl}${url}`);
  const bytes = Buffer.from(await response.arrayBuffer());
  return response.headers.get('content-type') === 'image/png' && bytes.subarray(1, 4).toString() === 'PNG';
}
