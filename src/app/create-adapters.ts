import type { RequestListener } from 'node:http';
import type { Redis } from 'ioredis';
import type { TurnTraceStore } from '../agent/turn-trace.js';
import type { ChatAdapter, Platform } from '../bot/chat-adapter.js';
import { createDiscordAdapter } from '../bot/discord/discord-adapter.js';
import type { RunsDirectory } from '../bot/runs-directory.js';
import { createSlackAdapter } from '../bot/slack/slack-adapter.js';
import { createPlaygroundApp, type PlaygroundApp } from '../bot/web/playground-app.js';
import { createWebTurnsRoutes } from '../bot/web/turns-api.js';
import { createWebAdapter, type WebAdapter } from '../bot/web/web-adapter.js';
import type { WebStore } from '../bot/web/web-store.js';
import type { Config } from '../config/config.js';
import { definedOnly } from '../defined-only.js';
import type { Logger } from '../logger.js';
import { createWebRunsRoutes } from '../playground/runs-api.js';
import { createWebRunsSource } from '../playground/runs-source.js';
import type { RunOperations } from '../runs/operations/operation-types.js';
import { createRunsDirectory } from '../runs/operations/runs-directory.js';
import type { RunQueries } from '../runs/run-queries.js';

type Mount = { pathPrefix: string; listener: RequestListener };

interface AdapterParts {
  config: Config;
  logger: Logger;
  /** The playground's live events subscribe on a duplicate of it. */
  redis: Redis;
  webStore: WebStore;
  traces: TurnTraceStore;
  /** Listeners the playground's HTTP server also serves (health, metrics, the queue board). */
  mounts: readonly Mount[];
  /** Runs are read through the facade and changed through chat's operations, on every surface. */
  runs: RunQueries;
  operations: RunOperations;
  /** Extra adapters (tests' doubles); one of a platform replaces the configured one. */
  extra?: readonly ChatAdapter[];
}

interface ComposedAdapters {
  adapters: Map<Platform, ChatAdapter>;
  web: WebAdapter;
  playground: PlaygroundApp;
}

/**
 * Every chat surface, from config: the web chat adapter hosted by the playground app (always there), and
 * Slack and Discord when their variables are set. The surfaces that list runs get them in their options.
 */
export function createAdapters(parts: AdapterParts): ComposedAdapters {
  const { config, logger } = parts;
  const runsDirectory = createRunsDirectory(parts);
  const configured = createConfiguredAdapters(config, logger, runsDirectory);
  const webLogger = logger.child({ component: 'web' });
  const playground = createPlaygroundApp({
    store: parts.webStore,
    redis: parts.redis,
    host: config.host,
    port: config.port,
    botName: config.botName,
    playground: config.playground,
    logger: webLogger,
    extensions: [
      createWebRunsRoutes({ source: createWebRunsSource(parts), logger: webLogger, botName: config.botName }),
      createWebTurnsRoutes({ store: parts.webStore, traces: parts.traces }),
    ],
    mounts: [...parts.mounts, ...configured.mounts],
  });
  const web = createWebAdapter({ store: parts.webStore, host: playground });
  const adapters = new Map<Platform, ChatAdapter>([['web', web]]);
  for (const adapter of [...configured.adapters, ...(parts.extra ?? [])]) {
    adapters.set(adapter.platform, adapter);
  }
  return { adapters, web, playground };
}

/** The platform adapters whose variables are set. */
function createConfiguredAdapters(config: Config, logger: Logger, runs: RunsDirectory) {
  const adapters: ChatAdapter[] = [];
  const mounts: Mount[] = [];
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
      runs,
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
        runs,
      }),
    );
  }
  return { adapters, mounts };
}
