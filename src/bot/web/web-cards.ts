import { definedOnly } from '../../defined-only.js';
import type { Card } from '../chat-adapter.js';
import type { WebCard, WebStore } from './web-store.js';

/**
 * Render a neutral `Card` for the playground: the image becomes a stored file URL, and a resolved card
 * drops its buttons (the outcome line replaces them, the card stays in the thread as the audit trail).
 */
export async function toWebCard(card: Card, store: Pick<WebStore, 'saveFile'>): Promise<WebCard> {
  const webCard: WebCard = {};
  if (card.title !== undefined) webCard.title = card.title;
  if (card.text !== undefined) webCard.text = card.text;
  if (card.fields !== undefined && card.fields.length > 0) {
    webCard.fields = card.fields.map((field) => ({ label: field.label, value: field.value }));
  }
  if (card.image !== undefined) {
    const saved = await store.saveFile({
      name: card.image.filename,
      contentType: 'image/png',
      data: card.image.png,
    });
    webCard.imageUrl = saved.url;
  }
  if (card.attachment !== undefined) webCard.attachment = { ...card.attachment };
  if (card.resolved !== undefined) {
    webCard.resolved = card.resolved;
  } else if (card.actions !== undefined && card.actions.length > 0) {
    webCard.actions = card.actions.map((action) => ({
      actionId: action.actionId,
      label: action.label,
      ...definedOnly({ style: action.style }),
    }));
  }
  return webCard;
}
