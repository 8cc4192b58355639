/**
 * The Slack `ChatAdapter`. Bolt does transport only (Socket Mode or signed HTTP, acks, routing);
 * routing decisions live in `slack-routing.ts` / `slack-listeners.ts`, posting in `slack-messages.ts`, rendering
 * in `cards.ts` / `mrkdwn.ts`, error mapping in `slack-errors.ts`. Every inbound delivery is acknowledged before
 * any slow work.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { App, HTTPReceiver, SocketModeReceiver, webApi } from '@slack/bolt';
import { definedOnly } from '../../defined-only.js';
import { PlatformError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { ChatAdapter, ChatUser, InboundHandlers } from '../chat-adapter.js';
import type { RunsDirectory } from '../runs-directory.js';
import { registerAppHome } from './app-home.js';
import { createBoltLogger } from './bolt-logger.js';
import { createRecentIds } from './recent-ids.js';
import { formView, registerFormSubmissions } from './slack-forms.js';
import { registerListeners } from './slack-listeners.js';
import { createSlackCall, createSlackMessages } from './slack-messages.js';
import { type BotIdentity, mentionedUsers, toPlainText } from './slack-routing.js';
import { createUserDirectory } from './user-directory.js';

interface SlackAdapterConfig {
  /** `xoxb-…` bot token; always required. */
  botToken: string;
  /** `xapp-…` app-level token with `connections:write`; when set, Socket Mode is used. */
  appToken?: string | undefined;
  /** Signing secret; required for HTTP mode (no app token). */
  signingSecret?: string | undefined;
  /** Web API base in the form `https://slack.com/api/`; also used for Socket Mode's `apps.connections.open`. */
  apiUrl?: string | undefined;
  /** Handle messages written by other bots. */
  allowBots: boolean;
  /** The bot's name, used in help and refusal texts. */
  botName: string;
  logger: Logger;
  /**
   * HTTP mode only: listen on this port (0 = ephemeral) and serve `/slack/events`. Leave it unset to
   * mount `adapter.requestListener` on an existing server instead (route `/slack/events` to it).
   */
  httpPort?: number | undefined;
  httpHost?: string | undefined;
  /** The slash command name; default `/shepherd`. */
  slashCommand?: string | undefined;
  /** How long resolved user names are cached; default 10 minutes. */
  userCacheTtlMs?: number | undefined;
  /** Web API request timeout; default 30 s. */
  requestTimeoutMs?: number | undefined;
  /** Texts that would need more messages than this are cut and attached as a file; default 4. */
  maxMessagesPerPost?: number | undefined;
  /** The runs the App Home tab lists and changes; without it the tab says runs are not available here. */
  runs?: RunsDirectory | undefined;
}

export interface SlackAdapter extends ChatAdapter {
  readonly platform: 'slack';
  readonly mode: 'socket' | 'http';
  /**
   * HTTP mode: a Node request listener for `/slack/events` (events, interactivity and slash commands,
   * signature-verified). Answers 503 until `start()` has run. Usable whether or not `httpPort` is set.
   */
  readonly requestListener: RequestListener;
  /** The address the adapter's own HTTP server listens on (HTTP mode with `httpPort`), else undefined. */
  httpAddress(): AddressInfo | undefined;
  /** The identity learned from `auth.test` at start. */
  identity(): { botUserId: string; botId: string | undefined } | undefined;
  postEphemeral(threadId: string, userId: string, text: string): Promise<void>;
}

const DEFAULT_MAX_MESSAGES = 4;

export function createSlackAdapter(config: SlackAdapterConfig): SlackAdapter {
  const logger = config.logger.child({ component: 'slack' });
  const boltLogger = createBoltLogger(config.logger);
  const mode: 'socket' | 'http' = config.appToken === undefined ? 'http' : 'socket';
  if (mode === 'http' && config.signingSecret === undefined) {
    throw new PlatformError(
      'slack',
      'config_invalid',
      'Slack HTTP mode needs SLACK_SIGNING_SECRET (or set SLACK_APP_TOKEN for Socket Mode)',
      {
        retryable: false,
      },
    );
  }
  const slackApiUrl = config.apiUrl ?? 'https://slack.com/api/';
  const slashCommand = config.slashCommand ?? '/shepherd';
  const maxMessages = Math.max(2, config.maxMessagesPerPost ?? DEFAULT_MAX_MESSAGES);
  // Our own client: rate limits surface as errors so the notify queue (not the SDK) does the waiting.
  const client = new webApi.WebClient(config.botToken, {
    slackApiUrl,
    logger: boltLogger,
    rejectRateLimitedCalls: true,
    retryConfig: { retries: 0 },
    timeout: config.requestTimeoutMs ?? 30_000,
  });
  const users = createUserDirectory({
    usersInfo: (arguments_) => client.users.info(arguments_),
    logger,
    ...definedOnly({ ttlMs: config.userCacheTtlMs }),
  });
  const recentDeliveries = createRecentIds();

  let app: App | undefined;
  let httpReceiver: HTTPReceiver | undefined;
  let receiverClient: SocketModeReceiver['client'] | undefined;
  let listening: AddressInfo | undefined;
  let bot: BotIdentity | undefined;

  const call = createSlackCall(logger);
  const messages = createSlackMessages({ client, call, logger, maxMessages });

  async function chatUser(userId: string): Promise<ChatUser> {
    return { id: userId, name: await users.displayName(userId) };
  }

  async function plainText(rawText: string): Promise<string> {
    const ids = mentionedUsers(rawText).slice(0, 20);
    const names = new Map<string, string>();
    await Promise.all(ids.map(async (id) => names.set(id, await users.displayName(id))));
    return toPlainText(rawText, names);
  }

  const requestListener: RequestListener = (request: IncomingMessage, response: ServerResponse) => {
    if (httpReceiver === undefined) {
      response.writeHead(503, { 'content-type': 'text/plain' });
      response.end('slack adapter not started');
      return;
    }
    httpReceiver.requestListener(request, response);
  };

  return {
    platform: 'slack',
    mode,
    requestListener,

    httpAddress: () => listening,
    identity: () => (bot === undefined ? undefined : { botUserId: bot.botUserId, botId: bot.botId }),

    async start(handlers: InboundHandlers): Promise<void> {
      if (app !== undefined) throw new Error('slack adapter already started');
      const auth = await call('auth.test', '-', () => client.auth.test());
      if (auth.user_id === undefined) {
        throw new PlatformError('slack', 'invalid_auth', 'auth.test returned no bot user id', {
          retryable: false,
        });
      }
      bot = { botUserId: auth.user_id, botId: auth.bot_id, allowBots: config.allowBots };
      const receiver =
        mode === 'socket'
          ? new SocketModeReceiver({
              appToken: config.appToken ?? '',
              logger: boltLogger,
              // A fresh object: the socket client mutates it (it adds its own reconnect retry policy).
              installerOptions: { clientOptions: { slackApiUrl } },
            })
          : new HTTPReceiver({
              signingSecret: config.signingSecret ?? '',
              endpoints: '/slack/events',
              logger: boltLogger,
              processBeforeResponse: false,
            });
      app = new App({
        receiver,
        token: config.botToken,
        botId: auth.bot_id,
        botUserId: auth.user_id,
        // We ran auth.test ourselves; skipping Bolt's keeps the first event's ack free of a network call.
        tokenVerificationEnabled: false,
        clientOptions: { slackApiUrl },
        logger: boltLogger,
      });
      registerListeners(app, handlers, bot, {
        logger,
        recentDeliveries,
        chatUser,
        plainText,
        postEphemeral: messages.postEphemeral,
        openForm: async (triggerId, form, action) => {
          await call('views.open', action.threadId, () =>
            client.views.open({ trigger_id: triggerId, view: formView(form, action) }),
          );
        },
        postRoot: (channel, mrkdwn) =>
          call('chat.postMessage', `slack:${channel}:-`, () =>
            messages.postBody(channel, undefined, {
              text: mrkdwn,
              blocks: [{ type: 'section', text: { type: 'mrkdwn', text: mrkdwn } }],
            }),
          ),
        slashCommand,
        botName: config.botName,
      });
      registerFormSubmissions(app, handlers, { logger, chatUser, postEphemeral: messages.postEphemeral });
      registerAppHome(app, {
        logger,
        runs: config.runs,
        chatUser,
        publish: async (userId, view) => {
          await call('views.publish', `slack:home:${userId}`, () =>
            client.views.publish({ user_id: userId, view }),
          );
        },
      });
      if (receiver instanceof SocketModeReceiver) receiverClient = receiver.client;
      if (receiver instanceof HTTPReceiver) {
        httpReceiver = receiver;
        if (config.httpPort !== undefined) {
          const server = await receiver.start({
            port: config.httpPort,
            host: config.httpHost ?? '127.0.0.1',
          });
          listening = server.address() as AddressInfo;
        }
      } else {
        await app.start();
      }
      logger.info({ mode, botUserId: bot.botUserId, address: listening }, 'slack adapter started');
    },

    isConnected(): boolean {
      if (app === undefined) return false;
      if (mode === 'http') return true;
      const socket = (receiverClient?.websocket as { isActive?: () => boolean } | undefined)?.isActive;
      return typeof socket === 'function' && socket.call(receiverClient?.websocket) === true;
    },

    async stop(): Promise<void> {
      const current = app;
      app = undefined;
      if (current === undefined) return;
      if (mode === 'socket' || listening !== undefined) await current.stop();
      httpReceiver = undefined;
      listening = undefined;
    },

    postMessage: messages.postMessage,
    editMessage: messages.editMessage,
    postCard: messages.postCard,
    updateCard: messages.updateCard,
    upload: messages.upload,
    postEphemeral: messages.postEphemeral,
  };
}
