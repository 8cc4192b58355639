import type { ThreadState } from '../agent/thread-state.js';
import type { ChatUser } from '../bot/chat-adapter.js';
import type { RunFollows } from '../runs/operations/run-follows.js';
import { stripLeadingMention } from './parse-command.js';

/**
 * The thread's own commands, answered without the LLM: `session` (summary, model, follows),
 * `model [name]` (within the allowed list), `reset` (a fresh session) and `cancel` (stop the running turn).
 */

type SessionCommand =
  | { name: 'session' }
  | { name: 'model'; model?: string }
  | { name: 'reset' }
  | { name: 'cancel' };

const MODEL_NAME = /^[\w./:@-]{1,200}$/;

export function parseSessionCommand(rawText: string, botName = 'shepherd'): SessionCommand | undefined {
  const text = stripLeadingMention(rawText, botName).replace(/^\//, '');
  const [head, ...rest] = text.split(/\s+/).filter((token) => token.length > 0);
  const verb = head?.toLowerCase();
  if (verb === 'session' && rest.length === 0) return { name: 'session' };
  if (verb === 'reset' && rest.length === 0) return { name: 'reset' };
  if (verb === 'cancel' && rest.length === 0) return { name: 'cancel' };
  if (verb === 'model') {
    if (rest.length === 0) return { name: 'model' };
    if (rest.length === 1 && MODEL_NAME.test(rest[0] ?? ''))
      return { name: 'model', model: rest[0] as string };
  }
  return undefined;
}

interface SessionCommandOptions {
  state: ThreadState;
  follows: RunFollows;
  /** The configured default model and the allowed list (`SHEPHERD_LLM_MODELS`, default included). */
  defaultModel: string;
  allowedModels: readonly string[];
  historyLength(threadId: string): Promise<number>;
  /** The thread's LLM spend line (tokens, dollars, cap). */
  llmSpend?(threadId: string): Promise<string>;
  botName: string;
  /** The thread's plan (the agent's `plan` tool) as lines, when it has one. */
  plan?: (threadId: string) => Promise<string | undefined>;
}

export function createSessionCommands(options: SessionCommandOptions) {
  const { state, follows } = options;

  // A model dropped from the allowed list since it was chosen is no longer used (see app.ts).
  const currentModel = async (threadId: string) => {
    const chosen = await state.model(threadId);
    return chosen !== undefined && options.allowedModels.includes(chosen) ? chosen : options.defaultModel;
  };
  const allowedText = () => options.allowedModels.map((model) => `\`${model}\``).join(', ');

  async function describeFollows(threadId: string): Promise<string[]> {
    const list = await follows.forThread(threadId);
    if (list.length === 0) return ['Follows: none.'];
    return [
      'Follows:',
      ...list.map(
        (follow) =>
          `- ${follow.runName} (${follow.runId}) on ${follow.events.join(', ')}, asked by ${follow.by.name}: "${follow.note}"`,
      ),
    ];
  }

  async function execute(command: SessionCommand, threadId: string, actor: ChatUser): Promise<string> {
    switch (command.name) {
      case 'session': {
        const [model, summary, length, plan, spend] = await Promise.all([
          currentModel(threadId),
          state.summary(threadId),
          options.historyLength(threadId),
          options.plan?.(threadId),
          options.llmSpend?.(threadId),
        ]);
        return [
          `Model: \`${model}\`${model === options.defaultModel ? ' (default)' : ''}; allowed: ${allowedText()}.`,
          `History: ${length} message${length === 1 ? '' : 's'} kept${summary === undefined ? '' : `, ${summary.messages} older ones summarised`}.`,
          summary === undefined
            ? 'Summary: none yet (made when the history passes 50 messages).'
            : `Summary:\n${summary.summary}`,
          plan === undefined ? 'Plan: none.' : `Plan:\n${plan}`,
          ...(spend === undefined ? [] : [spend]),
          ...(await describeFollows(threadId)),
        ].join('\n');
      }
      case 'model': {
        const before = await currentModel(threadId);
        if (command.model === undefined) {
          return `This thread uses \`${before}\`. Allowed: ${allowedText()}. Switch with \`@${options.botName} model <name>\`.`;
        }
        if (!options.allowedModels.includes(command.model)) {
          return `\`${command.model}\` is not an allowed model here, so this thread stays on \`${before}\`. Allowed: ${allowedText()} (set by SHEPHERD_LLM_MODELS).`;
        }
        await state.setModel(threadId, command.model === options.defaultModel ? undefined : command.model);
        return command.model === before
          ? `This thread already uses \`${before}\`.`
          : `This thread now uses \`${command.model}\` (was \`${before}\`), switched by ${actor.name}.`;
      }
      case 'reset': {
        const [length, summary] = await Promise.all([
          options.historyLength(threadId),
          state.summary(threadId),
        ]);
        await state.reset(threadId);
        const kept = await follows.forThread(threadId);
        return [
          `Fresh session, started by ${actor.name}: I forgot the ${length} earlier message${length === 1 ? '' : 's'}${summary === undefined ? '' : ' and the summary'}, and the model is back to \`${options.defaultModel}\`.`,
          'Runs are not touched.',
          ...(kept.length === 0
            ? []
            : [
                `Still following: ${kept.map((follow) => follow.runName).join(', ')} (ask me to unfollow if you want).`,
              ]),
        ].join(' ');
      }
      case 'cancel': {
        // The cancelled turn already said so in the thread; this command arrives after it.
        if (await state.takeCancelled(threadId)) {
          await state.clearCancel(threadId);
          return '';
        }
        await state.clearCancel(threadId);
        return 'Nothing is running in this thread (any turn had already finished), so there is nothing to cancel.';
      }
    }
  }

  return {
    async tryHandle(threadId: string, text: string, actor: ChatUser): Promise<string | undefined> {
      const command = parseSessionCommand(text, options.botName);
      if (command === undefined) return undefined;
      return execute(command, threadId, actor);
    },
  };
}
