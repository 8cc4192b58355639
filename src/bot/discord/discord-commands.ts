import { type Client, Routes } from 'discord.js';
import type { Logger } from '../../logger.js';
import { toPlatformError } from './discord-errors.js';

/** The `/shepherd text:<…>` command: the same plain commands and questions as a mention. */
export const COMMAND_NAME = 'shepherd';
export const COMMAND_OPTION = 'text';

/** The raw application-command JSON (type 1 = chat input, option type 3 = string). */
export function commandDefinition(botName: string) {
  return {
    name: COMMAND_NAME,
    type: 1,
    description: `Ask ${botName} or run a plain command (runs, status, stop, chart …)`.slice(0, 100),
    options: [
      {
        type: 3,
        name: COMMAND_OPTION,
        description: 'What to ask or do, e.g. "status qwen-gsm8k-sft"',
        required: true,
        max_length: 2000,
      },
    ],
  };
}

/**
 * Register `/shepherd` in each guild (guild commands appear at once; global ones take up to an hour).
 * `PUT` replaces the guild's command list, so repeating it on every start is idempotent. Failures (most
 * often a missing `applications.commands` scope) are logged, not fatal: mentions still work.
 */
export async function registerGuildCommands(
  client: Client<true>,
  guildIds: readonly string[],
  botName: string,
  logger: Logger,
): Promise<void> {
  const body = [commandDefinition(botName)];
  for (const guildId of guildIds) {
    try {
      await client.rest.put(Routes.applicationGuildCommands(client.application.id, guildId), { body });
      logger.info({ guildId }, 'registered /shepherd');
    } catch (error) {
      const failure = toPlatformError(error, 'command registration');
      logger.warn(
        { guildId, code: failure.code, err: failure },
        'could not register /shepherd in this server (was the bot invited with the applications.commands scope?)',
      );
    }
  }
}
