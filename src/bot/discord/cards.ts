import type { Card, CardAction } from '../chat-adapter.js';

/*
 * Renders the neutral `Card` as a Discord embed plus button rows. Pure: no discord.js import, only the
 * raw API JSON shapes, so it is unit-testable and the limits are visible in one place.
 */

/** Discord's documented embed and component limits. */
export const DISCORD_LIMITS = {
  content: 2000,
  embedTitle: 256,
  embedDescription: 4096,
  embedFields: 25,
  fieldName: 256,
  fieldValue: 1024,
  footer: 2048,
  embedTotal: 6000,
  buttonsPerRow: 5,
  rows: 5,
  buttonLabel: 80,
  customId: 100,
} as const;

interface DiscordEmbedField {
  name: string;
  value: string;
  inline?: boolean;
}

interface DiscordEmbed {
  title?: string;
  description?: string;
  color?: number;
  fields?: DiscordEmbedField[];
  image?: { url: string };
  footer?: { text: string };
}

interface DiscordButton {
  type: 2;
  style: 1 | 2 | 3 | 4;
  label: string;
  custom_id: string;
}

interface DiscordActionRow {
  type: 1;
  components: DiscordButton[];
}

export interface DiscordFile {
  name: string;
  data: Uint8Array;
  contentType: string;
}

interface RenderedCard {
  embeds: DiscordEmbed[];
  components: DiscordActionRow[];
  files: DiscordFile[];
  /** Attachment descriptors to send with `files` (API v10 edits must list every attachment they keep). */
  attachments: { id: number; filename: string; description?: string }[];
  /** Buttons beyond 5 rows × 5 that could not be shown. */
  droppedActions: number;
}

const COLOR_OPEN = 0x5865f2;
const COLOR_RESOLVED = 0x57f287;
const OUTCOME_FIELD = 'Outcome';

/** Cut `text` to `limit` characters, marking the cut with an ellipsis. */
export function truncate(text: string, limit: number): string {
  if (text.length <= limit) return text;
  if (limit <= 1) return text.slice(0, limit);
  return `${text.slice(0, limit - 1)}…`;
}

/** Attachment names are referenced by `attachment://name`, so keep them to safe characters. */
export function safeFilename(filename: string, fallback = 'image.png'): string {
  const cleaned = filename.replace(/[^A-Za-z0-9_.-]/g, '_').replace(/^\.+/, '');
  return cleaned.length === 0 ? fallback : truncate(cleaned, 100);
}

function buttonStyle(style: CardAction['style']): DiscordButton['style'] {
  if (style === 'primary') return 1;
  if (style === 'danger') return 4;
  return 2;
}

/** Throws when an action id would not fit Discord's `custom_id`: it is an id, so it must never be cut. */
function assertCustomId(actionId: string): void {
  if (actionId.length === 0 || actionId.length > DISCORD_LIMITS.customId) {
    throw new RangeError(`card action id must be 1–${DISCORD_LIMITS.customId} characters: ${actionId}`);
  }
}

function embedSize(embed: DiscordEmbed): number {
  let size = (embed.title?.length ?? 0) + (embed.description?.length ?? 0) + (embed.footer?.text.length ?? 0);
  for (const field of embed.fields ?? []) size += field.name.length + field.value.length;
  return size;
}

/** Keep the whole embed under 6,000 characters: shorten the description first, then drop trailing fields. */
function fitTotal(embed: DiscordEmbed): void {
  let excess = embedSize(embed) - DISCORD_LIMITS.embedTotal;
  if (excess <= 0) return;
  if (embed.description !== undefined) {
    const keep = Math.max(0, embed.description.length - excess);
    embed.description = truncate(embed.description, Math.max(keep, 1));
    excess = embedSize(embed) - DISCORD_LIMITS.embedTotal;
  }
  const fields = embed.fields ?? [];
  // The outcome field is the point of a resolved card, so it is the last one to go.
  while (excess > 0 && fields.length > 0) {
    let removeAt = fields.length - 1;
    while (removeAt > 0 && fields[removeAt]?.name === OUTCOME_FIELD) removeAt -= 1;
    const [removed] = fields.splice(removeAt, 1);
    excess -= (removed?.name.length ?? 0) + (removed?.value.length ?? 0);
  }
  if (fields.length === 0) delete embed.fields;
}

/** Render a card. A resolved card keeps its content, gains an "Outcome" field and loses its buttons. */
export function renderCard(card: Card): RenderedCard {
  const embed: DiscordEmbed = { color: card.resolved === undefined ? COLOR_OPEN : COLOR_RESOLVED };
  if (card.title !== undefined && card.title !== '')
    embed.title = truncate(card.title, DISCORD_LIMITS.embedTitle);
  if (card.text !== undefined && card.text !== '') {
    embed.description = truncate(card.text, DISCORD_LIMITS.embedDescription);
  }

  const reserved = card.resolved === undefined ? 0 : 1;
  const fields: DiscordEmbedField[] = (card.fields ?? [])
    .slice(0, DISCORD_LIMITS.embedFields - reserved)
    .map((field) => ({
      name: truncate(field.label === '' ? '\u200b' : field.label, DISCORD_LIMITS.fieldName),
      value: truncate(field.value === '' ? '\u200b' : field.value, DISCORD_LIMITS.fieldValue),
      inline: field.value.length <= 40,
    }));
  if (card.resolved !== undefined) {
    fields.push({ name: OUTCOME_FIELD, value: truncate(card.resolved, DISCORD_LIMITS.fieldValue) });
  }
  if (fields.length > 0) embed.fields = fields;

  const files: DiscordFile[] = [];
  const attachments: RenderedCard['attachments'] = [];
  if (card.image !== undefined) {
    const name = safeFilename(card.image.filename);
    files.push({ name, data: card.image.png, contentType: 'image/png' });
    attachments.push({ id: 0, filename: name, description: truncate(card.image.alt, 1024) });
    embed.image = { url: `attachment://${name}` };
  }
  if (card.attachment !== undefined) {
    const name = safeFilename(card.attachment.filename, 'script.txt');
    files.push({
      name,
      data: new TextEncoder().encode(card.attachment.text),
      contentType: 'text/plain; charset=utf-8',
    });
    attachments.push({ id: attachments.length, filename: name });
  }
  fitTotal(embed);

  const components: DiscordActionRow[] = [];
  let droppedActions = 0;
  if (card.resolved === undefined) {
    const actions = card.actions ?? [];
    const capacity = DISCORD_LIMITS.buttonsPerRow * DISCORD_LIMITS.rows;
    droppedActions = Math.max(0, actions.length - capacity);
    actions.slice(0, capacity).forEach((action, index) => {
      assertCustomId(action.actionId);
      const button: DiscordButton = {
        type: 2,
        style: buttonStyle(action.style),
        label: truncate(action.label === '' ? action.actionId : action.label, DISCORD_LIMITS.buttonLabel),
        custom_id: action.actionId,
      };
      const rowIndex = Math.floor(index / DISCORD_LIMITS.buttonsPerRow);
      const row = components[rowIndex] ?? { type: 1, components: [] };
      row.components.push(button);
      components[rowIndex] = row;
    });
  }

  return { embeds: [embed], components, files, attachments, droppedActions };
}
