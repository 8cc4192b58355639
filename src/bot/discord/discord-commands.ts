import { type Client, Routes } from 'discord.js';
import { definedOnly } from '../../defined-only.js';
import type { Logger } from '../../logger.js';
import { toPlatformError } from './discord-errors.js';

/*
 * `/shepherd <subcommand>`: each subcommand is one of the plain chat commands (or a free request), turned
 * back into the text a person would have typed, so the core parses and authorizes it exactly as chat.
 */
export const COMMAND_NAME = 'shepherd';

/** Option names (kept short: Discord shows them next to the command). */
export const OPTION = { request: 'request', run: 'run', metrics: 'metrics' } as const;

// Discord's numeric enums, spelled out so the JSON below reads like the API reference.
const SUB_COMMAND = 1;
const STRING = 3;
const CHAT_INPUT = 1;
/** Interaction contexts: a server and the bot's DM (group DMs need a user install, which Shepherd is not). */
const CONTEXTS = [0, 1];
const GUILD_INSTALL = 0;

const runOption = (required: boolean, description: string) => ({
  type: STRING,
  name: OPTION.run,
  description,
  required,
  autocomplete: true,
  max_length: 100,
});

/** A free-text option: what to launch, or what to ask. */
const requestOption = (description: string) => ({
  type: STRING,
  name: OPTION.request,
  description,
  required: true,
  max_length: 2000,
});

/** A subcommand about one run (`status`, `pause`, …), given by name or id. */
const runSubcommand = (name: string, description: string, required = true) => ({
  type: SUB_COMMAND,
  name,
  description,
  options: [runOption(required, 'Run name or id')],
});

/** The raw application-command JSON. */
function commandDefinition(botName: string) {
  return {
    name: COMMAND_NAME,
    type: CHAT_INPUT,
    description: `Talk to ${botName}: launch, list, watch and control training runs`.slice(0, 100),
    // Usable in the bot's DMs as well as in servers (`dm_permission` for older clients).
    contexts: CONTEXTS,
    integration_types: [GUILD_INSTALL],
    dm_permission: true,
    // Set on purpose, not left to the default: every member may use /shepherd (null = no permission needed),
    // because Shepherd checks who may approve, stop or change a run itself (SHEPHERD_APPROVERS, the run's
    // thread). A server that wants fewer users restricts it in Server Settings → Integrations.
    default_member_permissions: null,
    options: [
      {
        type: SUB_COMMAND,
        name: 'run',
        description: 'Launch a run: "train.py --gpus 2" or in words, "fine-tune Qwen on gsm8k"',
        options: [requestOption('A script with options, or what to train in plain words')],
      },
      { type: SUB_COMMAND, name: 'runs', description: 'List the runs' },
      runSubcommand('status', "A run's status (all runs when none is given)", false),
      runSubcommand('pause', 'Pause a run (it can be resumed from its checkpoint)'),
      runSubcommand('resume', 'Resume a paused run'),
      runSubcommand('stop', 'Stop a run'),
      {
        type: SUB_COMMAND,
        name: 'chart',
        description: "Chart a run's metrics",
        options: [
          runOption(true, 'Run name or id'),
          {
            type: STRING,
            name: OPTION.metrics,
            description: 'Metric names separated by spaces (default: loss)',
            required: false,
            max_length: 200,
          },
        ],
      },
      {
        type: SUB_COMMAND,
        name: 'ask',
        description: `Ask ${botName} anything`.slice(0, 100),
        options: [requestOption('Your question or request')],
      },
      { type: SUB_COMMAND, name: 'help', description: 'What I can do' },
    ],
  };
}

/** The values a subcommand was given, by option name. */
export type CommandValues = Partial<Record<(typeof OPTION)[keyof typeof OPTION], string>>;

/** The chat text a subcommand stands for; `undefined` for a subcommand this version does not know. */
export function commandText(subcommand: string, values: CommandValues): string | undefined {
  const run = values.run?.trim() ?? '';
  const request = values.request?.trim() ?? '';
  switch (subcommand) {
    case 'run':
      return `run ${request}`;
    case 'ask':
      return request;
    case 'runs':
    case 'help':
      return subcommand;
    case 'status':
      return run === '' ? 'status' : `status ${run}`;
    case 'pause':
    case 'resume':
    case 'stop':
      return `${subcommand} ${run}`;
    case 'chart': {
      const metrics = values.metrics?.trim() ?? '';
      return metrics === '' ? `chart ${run}` : `chart ${run} ${metrics}`;
    }
    default:
      return undefined;
  }
}

function warnRegistration(logger: Logger, error: unknown, guildId: string | undefined): void {
  const failure = toPlatformError(error, 'command registration');
  logger.warn(
    { ...definedOnly({ guildId }), code: failure.code, err: failure },
    guildId === undefined
      ? 'could not register the global /shepherd command'
      : 'could not register /shepherd in this server (was the bot invited with the applications.commands scope?)',
  );
}

/**
 * Registers `/shepherd` globally (every server the bot is in, and its DMs). `PUT` replaces the list, so
 * repeating it on every start is idempotent. Global changes can take a while to reach clients, so while
 * developing `DISCORD_GUILD_IDS` also registers it per server, where updates appear at once. Failures are
 * logged, not fatal: mentions still work.
 */
export async function registerCommands(
  client: Client<true>,
  guildIds: readonly string[],
  botName: string,
  logger: Logger,
): Promise<void> {
  const definition = commandDefinition(botName);
  try {
    await client.rest.put(Routes.applicationCommands(client.application.id), { body: [definition] });
    logger.info('registered the global /shepherd command');
  } catch (error) {
    warnRegistration(logger, error, undefined);
  }
  // Where a command may be used is a global command's property only; a server's copy leaves it out.
  const { contexts: _contexts, integration_types: _types, dm_permission: _dm, ...inServer } = definition;
  for (const guildId of guildIds) {
    try {
      await client.rest.put(Routes.applicationGuildCommands(client.application.id, guildId), {
        body: [inServer],
      });
      logger.info({ guildId }, 'registered /shepherd in the server');
    } catch (error) {
      warnRegistration(logger, error, guildId);
    }
  }
}
