/**
 * Neutral `Card` → Slack Block Kit, and long text → Block Kit messages within Slack's limits.
 * Pure: no SDK, no I/O. Block shapes follow https://docs.slack.dev/reference/block-kit/blocks.
 */
import type { Card, CardAction } from '../chat-adapter.js';
import {
  escapeMrkdwn,
  markdownToMrkdwn,
  SECTION_TEXT_LIMIT,
  splitMrkdwn,
  undisguiseMarkdownLinks,
} from './mrkdwn.js';

interface TextObject {
  type: 'plain_text' | 'mrkdwn';
  text: string;
  emoji?: boolean;
}

interface HeaderBlock {
  type: 'header';
  text: TextObject;
}

interface SectionBlock {
  type: 'section';
  text?: TextObject;
  fields?: TextObject[];
}

interface ContextBlock {
  type: 'context';
  elements: TextObject[];
}

interface ButtonElement {
  type: 'button';
  text: TextObject;
  action_id: string;
  value: string;
  style?: 'primary' | 'danger';
}

interface ActionsBlock {
  type: 'actions';
  block_id: string;
  elements: ButtonElement[];
}

/** Standard Markdown that Slack renders itself (https://docs.slack.dev/reference/block-kit/blocks/markdown-block). */
interface MarkdownBlock {
  type: 'markdown';
  text: string;
}

/** An image Slack hosts: a file uploaded by the bot, referred to by id. */
export interface ImageBlock {
  type: 'image';
  slack_file: { id: string };
  alt_text: string;
}

export type SlackBlock =
  | HeaderBlock
  | SectionBlock
  | ContextBlock
  | ActionsBlock
  | MarkdownBlock
  | ImageBlock;

/** One `chat.postMessage` / `chat.update` body (without channel and thread). */
export interface SlackMessageBody {
  /** Notification / accessibility fallback. */
  text: string;
  blocks: SlackBlock[];
}

/** Slack's documented limits. */
const SLACK_LIMITS = {
  blocksPerMessage: 50,
  messageChars: 40_000,
  sectionText: SECTION_TEXT_LIMIT,
  fieldsPerSection: 10,
  fieldText: 2000,
  headerText: 150,
  buttonText: 75,
  actionId: 255,
  elementsPerActions: 25,
  contextText: 3000,
  /** A markdown block's text; also the cumulative limit of markdown blocks in one message. */
  markdownText: 12_000,
} as const;

/** The `block_id` of a card's buttons; a resolved card has no block with this id. */
export const CARD_ACTIONS_BLOCK_ID = 'shepherd_card_actions';

function truncate(text: string, limit: number): string {
  return text.length <= limit ? text : `${text.slice(0, limit - 1)}…`;
}

function renderButton(action: CardAction): ButtonElement {
  // The value and action_id carry only the id; the core reloads everything else on click.
  const button: ButtonElement = {
    type: 'button',
    text: { type: 'plain_text', text: truncate(action.label, SLACK_LIMITS.buttonText), emoji: true },
    action_id: truncate(action.actionId, SLACK_LIMITS.actionId),
    value: action.actionId,
  };
  if (action.style === 'primary' || action.style === 'danger') button.style = action.style;
  return button;
}

function sectionsFor(mrkdwn: string): SectionBlock[] {
  return splitMrkdwn(mrkdwn, SLACK_LIMITS.sectionText).map((chunk) => ({
    type: 'section',
    text: { type: 'mrkdwn', text: chunk },
  }));
}

/**
 * Render a card as Block Kit: header (title), mrkdwn sections (text), field sections (≤ 10 fields
 * each), an actions block of buttons, or — once resolved — a context line with the outcome and no
 * buttons. The image is not a block: the adapter uploads it into the thread next to the card.
 */
export function renderCard(card: Card): SlackMessageBody {
  const blocks: SlackBlock[] = [];
  if (card.title !== undefined && card.title.trim() !== '') {
    blocks.push({
      type: 'header',
      text: { type: 'plain_text', text: truncate(card.title, SLACK_LIMITS.headerText), emoji: true },
    });
  }
  if (card.text !== undefined && card.text.trim() !== '')
    blocks.push(...sectionsFor(markdownToMrkdwn(card.text)));
  const fields = card.fields ?? [];
  for (let start = 0; start < fields.length; start += SLACK_LIMITS.fieldsPerSection) {
    blocks.push({
      type: 'section',
      fields: fields.slice(start, start + SLACK_LIMITS.fieldsPerSection).map((field) => ({
        type: 'mrkdwn',
        text: truncate(
          `*${markdownToMrkdwn(field.label)}*\n${markdownToMrkdwn(field.value)}`,
          SLACK_LIMITS.fieldText,
        ),
      })),
    });
  }
  if (card.resolved !== undefined) {
    blocks.push({
      type: 'context',
      elements: [
        { type: 'mrkdwn', text: truncate(markdownToMrkdwn(card.resolved), SLACK_LIMITS.contextText) },
      ],
    });
  } else if (card.actions !== undefined && card.actions.length > 0) {
    blocks.push({
      type: 'actions',
      block_id: CARD_ACTIONS_BLOCK_ID,
      elements: card.actions.slice(0, SLACK_LIMITS.elementsPerActions).map(renderButton),
    });
  }
  const fallbackParts = [card.title, card.text, card.resolved].filter(
    (part): part is string => part !== undefined && part.trim() !== '',
  );
  // The fallback text notifies too, so it is escaped like the blocks.
  const fallback = truncate(escapeMrkdwn(fallbackParts.join(' — ')) || 'card', SLACK_LIMITS.sectionText);
  return { text: fallback, blocks: blocks.slice(0, SLACK_LIMITS.blocksPerMessage) };
}

/** How many characters a message body counts against Slack's 40,000-character message limit. */
export function messageChars(body: SlackMessageBody): number {
  let total = body.text.length;
  for (const block of body.blocks) {
    if (block.type === 'section')
      total +=
        (block.text?.text.length ?? 0) +
        (block.fields ?? []).reduce((sum, field) => sum + field.text.length, 0);
    else if (block.type === 'header') total += block.text.text.length;
    else if (block.type === 'context')
      total += block.elements.reduce((sum, element) => sum + element.text.length, 0);
  }
  return total;
}

/** Fallback (notification) text: a short preview, so it does not eat the message's character budget. */
const FALLBACK_CHARS = 300;

/**
 * Turn Markdown into one or more Block Kit messages, in order, each within Slack's limits: sections
 * of at most 3,000 characters, at most 50 blocks and 40,000 characters per message.
 */
export function renderTextMessages(markdown: string): SlackMessageBody[] {
  const mrkdwn = markdownToMrkdwn(markdown);
  // Slack rejects a message without text, so an empty answer still says something.
  const sections = sectionsFor(mrkdwn.trim() === '' ? '_(empty message)_' : mrkdwn);
  const messages: SlackMessageBody[] = [];
  let blocks: SlackBlock[] = [];
  let chars = 0;
  const charBudget = SLACK_LIMITS.messageChars - FALLBACK_CHARS;
  const flush = (): void => {
    if (blocks.length === 0) return;
    const first = blocks[0];
    const preview = first?.type === 'section' ? (first.text?.text ?? '') : '';
    messages.push({ text: truncate(preview, FALLBACK_CHARS), blocks });
    blocks = [];
    chars = 0;
  };
  for (const section of sections) {
    const length = section.text?.text.length ?? 0;
    if (blocks.length >= SLACK_LIMITS.blocksPerMessage || chars + length > charBudget) flush();
    blocks.push(section);
    chars += length;
  }
  flush();
  return messages;
}

/**
 * Slack's `<…>` tokens (`<!channel>`, `<@U…>`, `<https://evil|https://good>`) must not ping or disguise a
 * link in text Shepherd quotes: a zero-width space after each `<` keeps the text readable and inert.
 */
function neutralizeSlackTokens(markdown: string): string {
  return markdown.replace(/<(?=\S)/g, '<\u200B');
}

/**
 * Agent text as Slack's `markdown` block (Slack renders headings, lists, tables and code itself), one
 * block per message because its 12,000-character limit counts across the message. The fallback text
 * (notifications, clients without markdown blocks) is the mrkdwn conversion.
 */
export function renderMarkdownMessages(markdown: string): SlackMessageBody[] {
  const source = markdown.trim() === '' ? '_(empty message)_' : markdown;
  // The fallback is converted from the original (mrkdwn escapes `<` itself); the block gets inert tokens
  // and undisguised links.
  return splitMrkdwn(source, SLACK_LIMITS.markdownText).map((chunk) => ({
    text: truncate(markdownToMrkdwn(chunk), FALLBACK_CHARS),
    blocks: [{ type: 'markdown', text: neutralizeSlackTokens(undisguiseMarkdownLinks(chunk)) }],
  }));
}

/** A card's blocks with its image placed just above its buttons (or last), all in one message. */
export function withImageBlock(body: SlackMessageBody, image: ImageBlock): SlackMessageBody {
  const blocks = [...body.blocks];
  const actions = blocks.findIndex((block) => block.type === 'actions');
  blocks.splice(actions < 0 ? blocks.length : actions, 0, image);
  return { text: body.text, blocks: blocks.slice(0, SLACK_LIMITS.blocksPerMessage) };
}
