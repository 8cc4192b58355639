import { z } from 'zod';
import type { ToolCall } from '../tools/tool-call.js';

/**
 * The neutral conversation model. Providers map it to their wire format; the session store keeps it
 * in Redis. Several people share one thread, so user messages carry their author.
 */

export interface UserMessage {
  role: 'user';
  /** Display name, shown to the model as `[alice] text`. */
  author: string;
  authorId?: string;
  content: string;
}

export interface AssistantMessage {
  role: 'assistant';
  content: string;
  toolCalls?: ToolCall[];
}

interface ToolMessage {
  role: 'tool';
  toolCallId: string;
  name: string;
  content: string;
  isError?: boolean;
}

export type ChatMessage = UserMessage | AssistantMessage | ToolMessage;

const toolCallSchema = z.object({ id: z.string(), name: z.string(), arguments: z.string() });

/** Validates stored messages (session history is outside input once it has been through Redis). */
export const chatMessageSchema = z.discriminatedUnion('role', [
  z.object({
    role: z.literal('user'),
    author: z.string(),
    authorId: z.string().optional(),
    content: z.string(),
  }),
  z.object({
    role: z.literal('assistant'),
    content: z.string(),
    toolCalls: z.array(toolCallSchema).optional(),
  }),
  z.object({
    role: z.literal('tool'),
    toolCallId: z.string(),
    name: z.string(),
    content: z.string(),
    isError: z.boolean().optional(),
  }),
]);

/** How a user message reads to the model: the author in brackets, then the text. */
export function formatUserContent(message: UserMessage): string {
  return `[${message.author}] ${message.content}`;
}
