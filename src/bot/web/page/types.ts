/** The JSON shapes the page reads from the playground API (mirrors web-store.ts, which the browser cannot import). */

export interface CardAction {
  actionId: string;
  label: string;
  style?: string;
}

export interface Card {
  title?: string;
  text?: string;
  fields?: { label: string; value: string }[];
  imageUrl?: string;
  actions?: CardAction[];
  resolved?: string;
}

export interface Message {
  id: string;
  channel: string;
  threadId: string;
  user: string;
  text: string;
  ts: number;
  editedAt?: number;
  card?: Card;
  images?: string[];
  files?: { name: string; url: string }[];
  visibleTo?: string;
}

export interface ThreadSummary {
  threadId: string;
  user: string;
  preview: string;
  ts: number;
  lastActivity: number;
}

export interface ChannelSummary {
  channel: string;
  threads: ThreadSummary[];
}
