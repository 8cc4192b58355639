import type { ChatUser } from '../bot/chat-adapter.js';
import { definedOnly } from '../defined-only.js';
import type { Logger } from '../logger.js';
import type { AlertRuleOperations } from '../monitor/alerts/alert-rule-operations.js';
import type { RunOperations } from '../runs/operations/operation-types.js';
import { RunAccessError } from '../runs/operations/run-access.js';
import { userFacingError } from '../runs/operations/run-texts.js';
import { type PlainCommand, parsePlainCommand, type WatchTarget } from './parse-command.js';

interface ChartRequest {
  run: string;
  metrics: string[];
  steps?: { from: number; to: number };
  threadId: string;
}

interface CommandHandlerOptions {
  operations: RunOperations;
  botName: string;
  helpText: () => Promise<string>;
  /** Posts a chart into the thread and returns a sentence; absent until charts are wired. */
  chart?: (request: ChartRequest) => Promise<string>;
  /** Private answer to one person (refusals); absent: the refusal is posted in the thread. */
  ephemeral?: (threadId: string, userId: string, text: string) => Promise<void>;
  /** `watch slurm:<id>` / `watch <log> --pid N`; absent when watching is not wired. */
  watch?: (
    target: WatchTarget,
    runName: string | undefined,
    threadId: string,
    actor: ChatUser,
  ) => Promise<string>;
  /** Alert rules and mutes (`alert`, `alerts`, `mute`, `unmute`). */
  alertRules?: AlertRuleOperations;
  logger: Logger;
}

/**
 * Plain commands: answered without the LLM, so they keep working when it is down. Returns `undefined`
 * for text that is not a command (it goes to the agent).
 */
export function createCommandHandler(options: CommandHandlerOptions) {
  const { operations } = options;

  async function execute(command: PlainCommand, threadId: string, actor: ChatUser): Promise<string> {
    switch (command.name) {
      case 'help':
        return options.helpText();
      case 'runs':
        return operations.list();
      case 'status':
        if (command.run === undefined) return operations.list();
        return command.full === true
          ? operations.status(command.run, { full: true })
          : operations.status(command.run);
      case 'pause':
        return operations.pause(command.run, actor, threadId, 'command');
      case 'schedule':
        return operations.schedule(command.run, command.cron, actor, threadId);
      case 'resume':
        return command.name === 'resume' && command.on !== undefined
          ? operations.resume(command.run, actor, threadId, 'command', undefined, { on: command.on })
          : operations.resume(command.run, actor, threadId, 'command');
      case 'fork':
        return operations.fork(command.run, command.request, actor, threadId);
      case 'stop':
        return operations.stop(command.run, actor, threadId, 'command');
      case 'run': {
        const { name: _name, path, command: argv, ...flags } = command;
        if (argv !== undefined) return operations.runCommand(argv, flags, threadId, actor);
        return operations.runWorkspaceScript(path ?? '', flags, threadId, actor);
      }
      case 'watch':
        if (options.watch === undefined) return 'Watching runs is not available in this deployment.';
        return options.watch(command.target, command.runName, threadId, actor);
      case 'chart':
        if (options.chart === undefined) return 'Charts are not available in this deployment.';
        // The chart carries its own caption; there is nothing more to say.
        await options.chart({
          run: command.run,
          metrics: command.metrics,
          threadId,
          ...definedOnly({ steps: command.steps }),
        });
        return '';
      case 'alert':
      case 'alert-remove':
      case 'alerts':
      case 'mute':
      case 'unmute':
        return executeAlertCommand(command, actor);
      case 'invalid':
        return `\`${command.command}\`: ${command.error}`;
    }
  }

  async function executeAlertCommand(
    command: Extract<PlainCommand, { name: 'alert' | 'alert-remove' | 'alerts' | 'mute' | 'unmute' }>,
    actor: ChatUser,
  ): Promise<string> {
    const rules = options.alertRules;
    if (rules === undefined) return 'Alert rules are not available in this deployment.';
    switch (command.name) {
      case 'alert':
        return rules.addRule(command.run, command.rule, actor);
      case 'alert-remove':
        return rules.removeRule(command.run, command.ruleId);
      case 'alerts':
        return rules.list(command.run);
      case 'mute':
        return rules.mute(command.run, command.detector, command.duration, actor);
      case 'unmute':
        return rules.unmute(command.run, command.detector, actor);
    }
  }

  return {
    async tryHandle(threadId: string, text: string, actor: ChatUser): Promise<string | undefined> {
      const command = parsePlainCommand(text, options.botName);
      if (command === undefined) return undefined;
      try {
        return await execute(command, threadId, actor);
      } catch (error) {
        options.logger.info({ threadId, command: command.name, err: error }, 'command refused');
        if (error instanceof RunAccessError && options.ephemeral !== undefined) {
          // Only the person who tried needs to hear "not yours"; the thread stays clean.
          const sent = await options.ephemeral(threadId, actor.id, error.message).then(
            () => true,
            () => false,
          );
          return sent ? '' : error.message;
        }
        return userFacingError(error);
      }
    },
  };
}
