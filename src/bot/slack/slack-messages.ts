/**
 * Everything the Slack adapter posts: text (markdown blocks with a mrkdwn fallback, long texts cut into a file),
 * cards (with their chart as an image block), uploads and ephemeral lines. Each Web API call is mapped to a
 * `PlatformError` by `call`.
 */
import type { webApi } from '@slack/bolt';
import { definedOnly } from '../../defined-only.js';
import { PlatformError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { Card, PostedMessage, Upload } from '../chat-adapter.js';
import {
  type ImageBlock,
  renderCard,
  renderMarkdownMessages,
  renderTextMessages,
  type SlackMessageBody,
  withImageBlock,
} from './cards.js';
import { markdownToMrkdwn } from './mrkdwn.js';
import { toPlatformError } from './slack-errors.js';
import { slackThread } from './slack-threads.js';

/** Runs one Web API call; a failure is logged and rethrown as a `PlatformError`. */
type SlackCall = <T>(context: string, threadId: string, work: () => Promise<T>) => Promise<T>;

export function createSlackCall(logger: Logger): SlackCall {
  return async (context, threadId, work) => {
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
  };
}

interface SlackMessages {
  /** Posts one rendered body; resolves its ts. Not wrapped in `call`: callers name the call. */
  postBody(channel: string, threadTs: string | undefined, body: SlackMessageBody): Promise<string>;
  postMessage(threadId: string, text: string): Promise<PostedMessage>;
  editMessage(threadId: string, messageId: string, text: string): Promise<void>;
  postCard(threadId: string, card: Card): Promise<PostedMessage>;
  updateCard(threadId: string, messageId: string, card: Card): Promise<void>;
  upload(threadId: string, upload: Upload): Promise<PostedMessage>;
  postEphemeral(threadId: string, userId: string, text: string): Promise<void>;
}

interface SlackMessagesOptions {
  client: webApi.WebClient;
  call: SlackCall;
  logger: Logger;
  /** Texts that would need more messages than this are cut and attached as a file. */
  maxMessages: number;
}

type UploadResponse = { files?: Array<{ files?: Array<{ id?: string }> }> };

const isInvalidBlocks = (error: unknown) => error instanceof PlatformError && error.code === 'invalid_blocks';

export function createSlackMessages(options: SlackMessagesOptions): SlackMessages {
  const { client, call, logger, maxMessages } = options;
  // Agent text goes out as a markdown block until Slack refuses one (then mrkdwn sections, see postMessage).
  let markdownBlocks = true;
  /** Image blocks of cards posted by this process, so an update (e.g. resolved) keeps the chart. */
  const cardImages = new Map<string, ImageBlock>();

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

  async function upload(threadId: string, file: Upload): Promise<PostedMessage> {
    const { channel, threadTs } = slackThread(threadId);
    // The top-level DM session has no thread: the file goes straight into the DM.
    const destination =
      threadTs === undefined ? { channel_id: channel } : { channel_id: channel, thread_ts: threadTs };
    return call('files.uploadV2', threadId, async () => {
      const response = await client.files.uploadV2({
        ...destination,
        file: Buffer.from(file.data),
        filename: file.filename,
        title: file.title ?? file.filename,
        ...(file.comment === undefined ? {} : { initial_comment: markdownToMrkdwn(file.comment) }),
      });
      // Upload v2 does not return the message ts; the file id names the upload instead.
      const fileId = (response as UploadResponse).files?.[0]?.files?.[0]?.id;
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
      return (response as UploadResponse).files?.[0]?.files?.[0]?.id;
    });
    if (fileId === undefined)
      throw new PlatformError('slack', 'upload_failed', 'slack upload returned no file id', {
        retryable: true,
      });
    return { type: 'image', slack_file: { id: fileId }, alt_text: image.alt.slice(0, 2000) || 'chart' };
  }

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

  async function postMessage(threadId: string, text: string): Promise<PostedMessage> {
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
      await upload(threadId, {
        filename: 'full-message.txt',
        data: new TextEncoder().encode(text),
        contentType: 'text/plain',
        title: 'Full message',
        comment: `_(cut: the full text, ${text.length} characters, is attached)_`,
      });
    }
    return { messageId: firstTs ?? '' };
  }

  async function editMessage(threadId: string, messageId: string, text: string): Promise<void> {
    const { channel } = slackThread(threadId);
    const [first] = markdownBlocks ? renderMarkdownMessages(text) : renderTextMessages(text);
    if (first === undefined) return;
    await call('chat.update', threadId, () =>
      client.chat.update({ channel, ts: messageId, text: first.text, blocks: first.blocks }),
    );
  }

  async function postCard(threadId: string, card: Card): Promise<PostedMessage> {
    const { channel, threadTs } = slackThread(threadId);
    let image: ImageBlock | undefined;
    if (card.image !== undefined) {
      // The chart and its buttons in one message: an image block referring to the uploaded file.
      image = await uploadForBlock(threadId, card.image);
    }
    if (card.attachment !== undefined) {
      // The whole script behind a cut excerpt, as a file in the thread right above its card.
      await upload(threadId, {
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
      await upload(threadId, {
        filename: card.image.filename,
        data: card.image.png,
        contentType: 'image/png',
        title: card.image.alt,
      });
      ts = await call('chat.postMessage', threadId, () => postBody(channel, threadTs, body));
    }
    if (image !== undefined) cardImages.set(ts, image);
    return { messageId: ts };
  }

  async function updateCard(threadId: string, messageId: string, card: Card): Promise<void> {
    const { channel } = slackThread(threadId);
    const image = cardImages.get(messageId);
    const body = image === undefined ? renderCard(card) : withImageBlock(renderCard(card), image);
    await call('chat.update', threadId, () =>
      client.chat.update({ channel, ts: messageId, text: body.text, blocks: body.blocks }),
    );
  }

  return { postBody, postMessage, editMessage, postCard, updateCard, upload, postEphemeral };
}
