import { type Client, Routes } from 'discord.js';
import type { Logger } from '../../logger.js';
import { targetChannelId } from './discord-threads.js';

/** The typing indicator never outlives a stuck turn by much. */
const TYPING_MAX_MS = 10 * 60_000;

interface TypingIndicator {
  /** Types in the thread until `stop`, renewing the indicator; at most TYPING_MAX_MS. */
  start(threadId: string): void;
  stop(threadId: string): void;
  stopAll(): void;
}

/**
 * "Shepherd is typing…" while a turn works. The turn's status line is a card with a Cancel button
 * (`cancel:turn`, see bot/turn-status-card.ts) that becomes the answer by an edit, so the adapter types from that card
 * until the message is edited or something else is posted there.
 */
export function createTypingIndicator(options: {
  client: Client;
  logger: Logger;
  clock: () => number;
  /** How often the indicator is renewed (Discord shows it ~10 s). */
  intervalMs: number;
}): TypingIndicator {
  const { client, logger, clock } = options;
  const typing = new Map<string, { timer: NodeJS.Timeout; until: number }>();

  function sendTyping(channelId: string): void {
    client.rest
      .post(Routes.channelTyping(channelId))
      .catch((error: unknown) => logger.debug({ channelId, err: error }, 'typing indicator failed'));
  }

  function stop(threadId: string): void {
    let channelId: string;
    try {
      channelId = targetChannelId(threadId);
    } catch {
      return;
    }
    const entry = typing.get(channelId);
    if (entry === undefined) return;
    clearInterval(entry.timer);
    typing.delete(channelId);
  }

  function start(threadId: string): void {
    const channelId = targetChannelId(threadId);
    if (typing.has(channelId)) return;
    sendTyping(channelId);
    const until = clock() + TYPING_MAX_MS;
    const timer = setInterval(() => {
      if (clock() > until) stop(threadId);
      else sendTyping(channelId);
    }, options.intervalMs);
    timer.unref();
    typing.set(channelId, { timer, until });
  }

  function stopAll(): void {
    for (const entry of typing.values()) clearInterval(entry.timer);
    typing.clear();
  }

  return { start, stop, stopAll };
}
