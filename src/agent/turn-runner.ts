import type { Logger } from '../logger.js';
import type { Batch, InboxItem, LockedValue } from '../queue/turn-inbox.js';
import { redactedHead } from '../text/redact.js';
import type { ChatMessage, UserMessage } from './messages.js';
import { untrustedBlock } from './untrusted.js';

/**
 * What the turn runner needs from the outside world; everything is injected. `State` is what the agent
 * turn needs besides the history (the thread's model, summary, budget), loaded with it.
 */
interface TurnRunnerDependencies<State> {
  /**
   * The thread's history and state; `values` holds what the turn worker read with the lock and the batch
   * (turn-worker.ts), absent when they must be read afresh.
   */
  loadHistory(
    threadId: string,
    values: readonly LockedValue[] | undefined,
  ): Promise<{ history: ChatMessage[]; state: State }>;
  /** Posts into a thread; `key` makes a repeat after a crash a no-op. */
  postOnce(key: string, threadId: string, text: string): Promise<{ messageId: string }>;
  /** What an earlier `postOnce` with this key posted, if it did. */
  postedOnce(key: string): Promise<{ messageId: string } | undefined>;
  /** Makes the message plain text again (a status card loses its button). */
  edit(threadId: string, messageId: string, text: string): Promise<void>;
  /**
   * When set, the status line is a card with a Cancel button while the turn runs (posted once by `key`,
   * then updated); the final `edit` turns it into the plain answer.
   */
  statusCard?: {
    post(key: string, threadId: string, text: string): Promise<{ messageId: string }>;
    update(threadId: string, messageId: string, text: string): Promise<void>;
  };
  /** Plain commands that need no LLM; resolves `undefined` when the text is not a command. */
  tryCommand(threadId: string, item: Extract<InboxItem, { type: 'message' }>): Promise<string | undefined>;
  runAgent(options: {
    threadId: string;
    history: ChatMessage[];
    state: State;
    actor: { id: string; name: string };
    onProgress: (status: string) => void;
  }): Promise<{ reply: string; newMessages: ChatMessage[] }>;
  /** Commits the batch and appends the messages to the session, atomically. */
  commit(threadId: string, batch: Batch, messages: ChatMessage[]): Promise<void>;
  logger: Logger;
  /** Minimum gap between two edits of the status message. */
  statusIntervalMs?: number;
  /** A turn that takes longer than this gets a status message (default 700 ms). */
  statusDelayMs?: number;
  /** Replies up to this length replace the status message; longer ones are posted below it. */
  inlineReplyLimit?: number;
  now?: () => number;
}

/**
 * Handles one batch of a thread's inbox: plain commands are answered directly, everything else goes to
 * one agent turn whose progress is shown in a single status message, edited at most once a second.
 */
export function createTurnRunner<State>(dependencies: TurnRunnerDependencies<State>) {
  const { logger } = dependencies;
  const statusIntervalMs = dependencies.statusIntervalMs ?? 1000;
  const inlineReplyLimit = dependencies.inlineReplyLimit ?? 1800;
  const now = dependencies.now ?? Date.now;
  const statusDelayMs = dependencies.statusDelayMs ?? 700;

  return async function processBatch(
    threadId: string,
    batch: Batch,
    values?: readonly LockedValue[],
  ): Promise<void> {
    const sessionMessages: ChatMessage[] = [];
    let commandRan = false;
    const forAgent: UserMessage[] = [];
    let actor = { id: 'system', name: 'system' };

    for (const [index, item] of batch.items.entries()) {
      if (item.type === 'event') {
        const message: UserMessage = { role: 'user', author: 'system', content: item.text };
        sessionMessages.push(message);
        forAgent.push(message);
        continue;
      }
      const message: UserMessage = {
        role: 'user',
        author: item.user.name,
        authorId: item.user.id,
        content: item.text,
      };
      sessionMessages.push(message);
      const commandReply = await dependencies.tryCommand(threadId, item);
      if (commandReply !== undefined) {
        commandRan = true;
        if (commandReply.length > 0) {
          await dependencies
            .postOnce(`${batch.batchId}:command:${index}`, threadId, commandReply)
            .catch((error: unknown) =>
              logger.error({ threadId, err: error }, 'a command answer could not be delivered'),
            );
        }
        // A command's answer quotes logs and files: the model reads it later as data, not as its own words.
        sessionMessages.push({
          role: 'assistant',
          content: commandReply ? untrustedBlock('command-output', commandReply) : '(done)',
        });
        continue;
      }
      forAgent.push(message);
      actor = item.user;
    }

    if (forAgent.length > 0) {
      const agentMessages = await runAgentWithStatus(
        threadId,
        batch.batchId,
        sessionMessages,
        actor,
        // A command (`model`, `reset`, `budget +N`) may have changed what was read with the lock.
        commandRan ? undefined : values,
      );
      sessionMessages.push(...agentMessages);
    }
    await dependencies.commit(threadId, batch, sessionMessages);
  };

  async function runAgentWithStatus(
    threadId: string,
    batchId: string,
    newMessages: ChatMessage[],
    actor: { id: string; name: string },
    values: readonly LockedValue[] | undefined,
  ): Promise<ChatMessage[]> {
    const started = now();
    const statusKey = `${batchId}:status`;
    let latestStatus = 'thinking…';
    let lastEditAt = 0;
    let pendingTimer: NodeJS.Timeout | undefined;
    let statusPosted: Promise<{ messageId: string } | undefined> | undefined;
    let editChain: Promise<unknown> = Promise.resolve();

    // A quick answer needs no status line; a slow turn gets one after `statusDelayMs`, then edits.
    const postStatus = () => {
      const post = dependencies.statusCard?.post ?? dependencies.postOnce;
      statusPosted ??= post(statusKey, threadId, latestStatus).catch((error: unknown) => {
        logger.warn({ threadId, err: error }, 'could not post a status message');
        return undefined;
      });
      lastEditAt = now();
    };
    const statusTimer = setTimeout(postStatus, statusDelayMs);
    const flushStatus = () => {
      pendingTimer = undefined;
      const posted = statusPosted;
      if (posted === undefined) return;
      const text = latestStatus;
      lastEditAt = now();
      const update = dependencies.statusCard?.update ?? dependencies.edit;
      editChain = editChain
        .then(() => posted)
        .then((message) => (message ? update(threadId, message.messageId, text) : undefined))
        .catch((error: unknown) => logger.debug({ threadId, err: error }, 'status edit failed'));
    };
    const onProgress = (status: string) => {
      latestStatus = status;
      if (pendingTimer !== undefined || statusPosted === undefined) return;
      const wait = Math.max(0, lastEditAt + statusIntervalMs - now());
      pendingTimer = setTimeout(flushStatus, wait);
    };

    const loaded = await dependencies.loadHistory(threadId, values);
    const history = [...loaded.history, ...newMessages];
    let reply: string;
    let produced: ChatMessage[];
    try {
      const result = await dependencies.runAgent({
        threadId,
        history,
        state: loaded.state,
        actor,
        onProgress,
      });
      reply = result.reply;
      produced = result.newMessages;
    } catch (error) {
      // The agent loop reports LLM trouble itself; anything reaching here is a bug, still told plainly.
      logger.error({ threadId, err: error }, 'agent turn crashed');
      reply = `Something went wrong while I was working on that (${redactedHead(String(error), 200)}). Plain commands still work — try \`help\`.`;
      produced = [{ role: 'assistant', content: reply }];
    }
    clearTimeout(statusTimer);
    if (pendingTimer !== undefined) clearTimeout(pendingTimer);
    await editChain;
    // A status line this batch posted before a crash is reused, so a retried turn leaves no stray one.
    const posted = (await statusPosted) ?? (await dependencies.postedOnce(statusKey).catch(() => undefined));
    const elapsed = ((now() - started) / 1000).toFixed(1);
    try {
      if (posted && reply.length <= inlineReplyLimit) {
        await dependencies.edit(threadId, posted.messageId, reply);
      } else {
        if (posted)
          await dependencies.edit(threadId, posted.messageId, `done in ${elapsed} s — answer below`);
        await dependencies.postOnce(`${batchId}:reply`, threadId, reply);
      }
    } catch (error) {
      // The notify queue already retried what retrying can fix; running the turn again would not help.
      logger.error({ threadId, err: error }, 'the reply could not be delivered to the thread');
    }
    return produced;
  }
}
