import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PlaygroundMessage, TestApp } from './app-harness.js';

/** Messages whose card title contains `titlePart`, in thread order. */
export function cardsTitled(messages: PlaygroundMessage[], titlePart: string): PlaygroundMessage[] {
  return messages.filter((message) => message.card?.title?.includes(titlePart));
}

/** Waits for the thread's approval card (titled with `titlePart`, if given) and returns it with its Approve id. */
export async function approvalCard(
  app: TestApp,
  threadId: string,
  titlePart = '',
): Promise<{ card: PlaygroundMessage; approve: string }> {
  const isCard = (message: PlaygroundMessage) =>
    (message.card?.title?.includes(titlePart) ?? false) &&
    (message.card?.actions?.some((action) => action.label === 'Approve') ?? false);
  const messages = await app.waitForMessages(threadId, (all) => all.some(isCard), 30_000);
  const card = messages.find(isCard);
  const approve = card?.card?.actions?.find((action) => action.label === 'Approve')?.actionId;
  if (card === undefined || approve === undefined) throw new Error(`no approval card in ${threadId}`);
  return { card, approve };
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

/** The action id of the card button labelled `label` ('' when there is none). */
export const actionOf = (message: PlaygroundMessage | undefined, label: string): string =>
  message?.card?.actions?.find((action) => action.label === label)?.actionId ?? '';
