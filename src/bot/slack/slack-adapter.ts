/**
 * The Slack `ChatAdapter`. Bolt does transport only (Socket Mode or signed HTTP, acks, routing);
 * routing decisions live in `inbound.ts`, rendering in `cards.ts` / `mrkdwn.ts`, error mapping in
 * `slack-errors.ts`. Every inbound delivery is acknowledged before any slow work.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { App, HTTPReceiver, SocketModeReceiver, webApi } from '@slack/bolt';
import { definedOnly } from '../../defined-only.js';
import { PlatformError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { Card, ChatAdapter, ChatUser, InboundHandlers, PostedMessage, Upload } from '../chat-adapter.js';
import { registerAppHome } from './app-home.js';
import { createBoltLogger } from './bolt-logger.js';
import {
  type ImageBlock,
  renderCard,
  renderMarkdownMessages,
  renderTextMessages,
  type SlackMessageBody,
  withImageBlock,
} from './cards.js';
import { markdownToMrkdwn } from './mrkdwn.js';
import { createRecentIds } from './recent-ids.js';
import { toPlatformError } from './slack-errors.js';
import { registerListeners } from './slack-listeners.js';
import { type BotIdentity, mentionedUsers, toPlainText } from './slack-routing.js';
import { slackThread } from './slack-threads.js';
import { createUserDirectory } from './user-directory.js';

export interface SlackAdapterConfig {
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
  // Agent text goes out as a markdown block until Slack refuses one (then mrkdwn sections, see postMessage).
  let markdownBlocks = true;
  const isInvalidBlocks = (error: unknown) =>
    error instanceof PlatformError && error.code === 'invalid_blocks';
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

  async function call<T>(context: string, threadId: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      const mapped = toPlatformError(error, context);
      logger.warn(
        { threadId, code: mapped.code, retryable: mapped.retryable, call: context },
        'slack call failed',
      );
      throw mapped;
    }
  }

  async function chatUser(userId: string): Promise<ChatUser> {
    return { id: userId, name: await users.displayName(userId) };
  }

  async function plainText(rawText: string): Promise<string> {
    const ids = mentionedUsers(rawText).slice(0, 20);
    const names = new Map<string, string>();
    await Promise.all(ids.map(async (id) => names.set(id, await users.displayName(id))));
    return toPlainText(rawText, names);
  }

  async function postBody(
    channel: string,
    threadTs: string | undefined,
    body: SlackMessageBody,
  ): Promise<string> {
    const response = await client.chat.postMessage({
      channel,
      ...definedOnly({ thread_ts: threadTs }),
      text: body.text,
      blocks: body.blocks,
      unfurl_links: false,
      unfurl_media: false,
    });
    if (response.ts === undefined) throw new Error('chat.postMessage returned no ts');
    return response.ts;
  }

  async function uploadFile(threadId: string, upload: Upload): Promise<PostedMessage> {
    const { channel, threadTs } = slackThread(threadId);
    // The top-level DM session has no thread: the file goes straight into the DM.
    const destination =
      threadTs === undefined ? { channel_id: channel } : { channel_id: channel, thread_ts: threadTs };
    return call('files.uploadV2', threadId, async () => {
      const response = await client.files.uploadV2({
        ...destination,
        file: Buffer.from(upload.data),
        filename: upload.filename,
        title: upload.title ?? upload.filename,
        ...(upload.comment === undefined ? {} : { initial_comment: markdownToMrkdwn(upload.comment) }),
      });
      // Upload v2 does not return the message ts; the file id names the upload instead.
      const fileId = (response as { files?: Array<{ files?: Array<{ id?: string }> }> }).files?.[0]
        ?.files?.[0]?.id;
      return { messageId: fileId ?? '' };
    });
  }

  /** Upload without sharing anywhere: the file is shown by an image block that refers to it. */
  async function uploadForBlock(threadId: string, image: NonNullable<Card['image']>): Promise<ImageBlock> {
    const fileId = await call('files.uploadV2', threadId, async () => {
      const response = await client.files.uploadV2({
        file: Buffer.from(image.png),
        filename: image.filename,
        title: image.alt,
      });
      return (response as { files?: Array<{ files?: Array<{ id?: string }> }> }).files?.[0]?.files?.[0]?.id;
    });
    if (fileId === undefined)
      throw new PlatformError('slack', 'upload_failed', 'slack upload returned no file id', {
        retryable: true,
      });
    return { type: 'image', slack_file: { id: fileId }, alt_text: image.alt.slice(0, 2000) || 'chart' };
  }
  /** Image blocks of cards posted by this process, so an update (e.g. resolved) keeps the chart. */
  const cardImages = new Map<string, ImageBlock>();

  async function postEphemeral(threadId: string, userId: string, text: string): Promise<void> {
    const { channel, threadTs } = slackThread(threadId);
    await call('chat.postEphemeral', threadId, () =>
      client.chat.postEphemeral({
        channel,
        user: userId,
        ...definedOnly({ thread_ts: threadTs }),
        text: markdownToMrkdwn(text),
      }),
    );
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
        postEphemeral,
        postRoot: (channel, mrkdwn) =>
          call('chat.postMessage', `slack:${channel}:-`, () =>
            postBody(channel, undefined, {
              text: mrkdwn,
              blocks: [{ type: 'section', text: { type: 'mrkdwn', text: mrkdwn } }],
            }),
          ),
        slashCommand,
        botName: config.botName,
      });
      registerAppHome(app, handlers, {
        logger,
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

    async postMessage(threadId: string, text: string): Promise<PostedMessage> {
      const { channel, threadTs } = slackThread(threadId);
      let messages = markdownBlocks ? renderMarkdownMessages(text) : renderTextMessages(text);
      let cut = messages.length > maxMessages;
      if (cut) {
        // Too long to read as chat: the first parts inline, the whole text as a file.
        messages = messages.slice(0, maxMessages - 1);
      }
      let firstTs: string | undefined;
      for (const [index, body] of messages.entries()) {
        let ts: string;
        try {
          ts = await call('chat.postMessage', threadId, () => postBody(channel, threadTs, body));
        } catch (error) {
          // A workspace that refuses markdown blocks gets the mrkdwn sections, now and from then on.
          if (index > 0 || !markdownBlocks || !isInvalidBlocks(error)) throw error;
          markdownBlocks = false;
          logger.warn({ threadId }, 'slack refused a markdown block; posting mrkdwn sections instead');
          messages = renderTextMessages(text);
          cut = messages.length > maxMessages;
          if (cut) messages = messages.slice(0, maxMessages - 1);
          for (const fallback of messages) {
            const posted = await call('chat.postMessage', threadId, () =>
              postBody(channel, threadTs, fallback),
            );
            firstTs ??= posted;
          }
          break;
        }
        firstTs ??= ts;
      }
      if (cut) {
        await uploadFile(threadId, {
          filename: 'full-message.txt',
          data: new TextEncoder().encode(text),
          contentType: 'text/plain',
          title: 'Full message',
          comment: `_(cut: the full text, ${text.length} characters, is attached)_`,
        });
      }
      return { messageId: firstTs ?? '' };
    },

    async editMessage(threadId: string, messageId: string, text: string): Promise<void> {
      const { channel } = slackThread(threadId);
      const [first] = markdownBlocks ? renderMarkdownMessages(text) : renderTextMessages(text);
      if (first === undefined) return;
      await call('chat.update', threadId, () =>
        client.chat.update({ channel, ts: messageId, text: first.text, blocks: first.blocks }),
      );
    },

    async postCard(threadId: string, card: Card): Promise<PostedMessage> {
      const { channel, threadTs } = slackThread(threadId);
      let image: ImageBlock | undefined;
      if (card.image !== undefined) {
        // The chart and its buttons in one message: an image block referring to the uploaded file.
        image = await uploadForBlock(threadId, card.image);
      }
      if (card.attachment !== undefined) {
        // The whole script behind a cut excerpt, as a file in the thread right above its card.
        await uploadFile(threadId, {
          filename: card.attachment.filename,
          data: new TextEncoder().encode(card.attachment.text),
          contentType: 'text/plain',
          title: card.attachment.filename,
        });
      }
      const body = renderCard(card);
      let ts: string;
      try {
        ts = await call('chat.postMessage', threadId, () =>
          postBody(channel, threadTs, image === undefined ? body : withImageBlock(body, image)),
        );
      } catch (error) {
        if (image === undefined || !isInvalidBlocks(error) || card.image === undefined) throw error;
        // Slack would not show the file in a block: the chart goes into the thread, then the card.
        logger.warn({ threadId }, 'slack refused the image block; posting the chart above the card');
        image = undefined;
        await uploadFile(threadId, {
          filename: card.image.filename,
          data: card.image.png,
          contentType: 'image/png',
          title: card.image.alt,
        });
        ts = await call('chat.postMessage', threadId, () => postBody(channel, threadTs, body));
      }
      if (image !== undefined) cardImages.set(ts, image);
      return { messageId: ts };
    },

    async updateCard(threadId: string, messageId: string, card: Card): Promise<void> {
      const { channel } = slackThread(threadId);
      const image = cardImages.get(messageId);
      const body = image === undefined ? renderCard(card) : withImageBlock(renderCard(card), image);
      await call('chat.update', threadId, () =>
        client.chat.update({ channel, ts: messageId, text: body.text, blocks: body.blocks }),
      );
    },

    upload: uploadFile,
    postEphemeral,
  };
}
