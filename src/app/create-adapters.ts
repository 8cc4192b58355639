import type { RequestListener } from 'node:http';
import type { ChatAdapter } from '../bot/chat-adapter.js';
import { createDiscordAdapter } from '../bot/discord/discord-adapter.js';
import { createSlackAdapter } from '../bot/slack/slack-adapter.js';
import type { Config } from '../config/config.js';
import { definedOnly } from '../defined-only.js';
import type { Logger } from '../logger.js';

interface ConfiguredAdapters {
  adapters: ChatAdapter[];
  /** Listeners the playground's HTTP server also serves (Slack's HTTP events at `/slack/events`). */
  mounts: Array<{ pathPrefix: string; listener: RequestListener }>;
}

/** The platform adapters whose variables are set; the web playground is always there and made elsewhere. */
export function createConfiguredAdapters(config: Config, logger: Logger): ConfiguredAdapters {
  const adapters: ChatAdapter[] = [];
  const mounts: ConfiguredAdapters['mounts'] = [];
  if (config.slack.botToken !== undefined) {
    const slack = createSlackAdapter({
      botToken: config.slack.botToken,
      ...definedOnly({
        appToken: config.slack.appToken,
        signingSecret: config.slack.signingSecret,
        apiUrl: config.slack.apiUrl,
      }),
      allowBots: config.slack.allowBots,
      botName: config.botName,
      logger: logger.child({ component: 'slack' }),
    });
    adapters.push(slack);
    if (slack.mode === 'http') mounts.push({ pathPrefix: '/slack/', listener: slack.requestListener });
  }
  if (config.discord.token !== undefined) {
    adapters.push(
      createDiscordAdapter({
        token: config.discord.token,
        apiUrl: config.discord.apiUrl,
        guildIds: config.discord.guildIds,
        botName: config.botName,
        logger: logger.child({ component: 'discord' }),
      }),
    );
  }
  return { adapters, mounts };
}
