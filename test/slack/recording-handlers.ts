/** A fake `InboundHandlers` (the core's port) that records calls and can be made slow. */
import type {
  ActionOutcome,
  InboundAction,
  InboundHandlers,
  InboundMessage,
} from '../../src/bot/chat-adapter.js';

export interface RecordingHandlers extends InboundHandlers {
  readonly messages: InboundMessage[];
  readonly actions: InboundAction[];
  /** Delay inside each handler, to prove acks do not wait for it. */
  delayMs: number;
  /** What `onAction` answers. */
  outcome: (action: InboundAction) => ActionOutcome;
  waitForMessages(count: number, timeoutMs?: number): Promise<InboundMessage[]>;
  waitForActions(count: number, timeoutMs?: number): Promise<InboundAction[]>;
}

export function createRecordingHandlers(): RecordingHandlers {
  const messages: InboundMessage[] = [];
  const actions: InboundAction[] = [];
  const waiters = new Set<() => void>();
  const wake = (): void => {
    for (const waiter of [...waiters]) waiter();
  };
  const waitFor = <T>(list: T[], count: number, timeoutMs: number, what: string): Promise<T[]> =>
    new Promise((resolve, reject) => {
      const check = (): boolean => {
        if (list.length < count) return false;
        clearTimeout(timer);
        waiters.delete(waiter);
        resolve(list.slice());
        return true;
      };
      const waiter = (): void => {
        check();
      };
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        reject(new Error(`expected ${count} ${what}, got ${list.length}`));
      }, timeoutMs);
      if (!check()) waiters.add(waiter);
    });
  const handlers: RecordingHandlers = {
    messages,
    actions,
    delayMs: 0,
    outcome: () => ({ status: 'accepted' }),
    async onMessage(message) {
      await new Promise((resolve) => setTimeout(resolve, handlers.delayMs));
      messages.push(message);
      wake();
      return true;
    },
    async onAction(action) {
      await new Promise((resolve) => setTimeout(resolve, handlers.delayMs));
      actions.push(action);
      wake();
      return handlers.outcome(action);
    },
    waitForMessages: (count, timeoutMs = 5000) => waitFor(messages, count, timeoutMs, 'messages'),
    waitForActions: (count, timeoutMs = 5000) => waitFor(actions, count, timeoutMs, 'actions'),
  };
  return handlers;
}
