import { Writable } from 'node:stream';
import { pino } from 'pino';
import type {
  ActionOutcome,
  InboundAction,
  InboundHandlers,
  InboundMessage,
} from '../../src/bot/chat-adapter.js';

/** A pino logger whose JSON lines are kept for assertions. */
export function createCapturingLogger() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      callback();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

/** The smallest `InboundHandlers`: records everything, answers clicks with a scriptable outcome. */
export function createRecordingHandlers() {
  const messages: InboundMessage[] = [];
  const actions: InboundAction[] = [];
  const state: { decide: (action: InboundAction) => Promise<ActionOutcome> } = {
    decide: async () => ({ status: 'accepted' }),
  };
  const handlers: InboundHandlers = {
    async onMessage(message) {
      messages.push(message);
      return true;
    },
    async onAction(action) {
      actions.push(action);
      return state.decide(action);
    },
  };
  return { handlers, messages, actions, state };
}
