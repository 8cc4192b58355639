import type { Card } from './chat-adapter.js';

/**
 * The status line of a running turn: a card with a Cancel button (a click stops the turn at the next
 * tool boundary). Adapters recognise it by its action id (Discord types while it is shown).
 */

/** The card's button (`cancel:turn`); the action router keys on the verb. */
export const TURN_ACTIONS = { cancel: 'cancel' } as const;
const CANCEL_TURN_ACTION_ID = `${TURN_ACTIONS.cancel}:turn`;

export function turnStatusCard(text: string): Card {
  return { text, actions: [{ actionId: CANCEL_TURN_ACTION_ID, label: 'Cancel', style: 'danger' }] };
}

export function isTurnStatusCard(card: Card): boolean {
  return card.actions?.some((action) => action.actionId === CANCEL_TURN_ACTION_ID) === true;
}
