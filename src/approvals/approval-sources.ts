import type { Logger } from '../logger.js';

/**
 * The "based on" line of an agent's start or script-change card: the sources of the thread's last
 * research. Other cards, cards people asked for, and a failed read (logged) show none.
 */
export async function researchSourcesFor(
  input: { kind: string; origin?: string | undefined; meta: { threadId: string } },
  basedOn: ((threadId: string) => Promise<string[]>) | undefined,
  logger: Logger,
): Promise<string[]> {
  const scriptCard = input.kind === 'start' || input.kind === 'script-change';
  if (!scriptCard || input.origin !== 'agent' || basedOn === undefined) return [];
  return basedOn(input.meta.threadId).catch((error: unknown) => {
    logger.warn({ err: error, threadId: input.meta.threadId }, 'research sources not read for the card');
    return [];
  });
}
