import type { ToolCall, ToolSpec } from '../tools/tool-call.js';
import type { ChatMessage } from './messages.js';

export interface LlmRequest {
  system: string;
  messages: ChatMessage[];
  tools: ToolSpec[];
  /** Why this call is made (e.g. `turn`, `tool_round`, `triage`); counted by monitoring. */
  reason: string;
  /** Overrides the configured model for this call (a thread's `model <name>` choice). */
  model?: string;
  signal?: AbortSignal;
}

export interface LlmResponse {
  text: string;
  toolCalls: ToolCall[];
  /** Token counts when the endpoint reports them (for metrics). */
  usage?: { inputTokens: number; outputTokens: number };
}

/**
 * The one narrow seam to a model endpoint. Implementations retry transient failures themselves and
 * throw `LlmError` once they give up.
 */
export interface LlmProvider {
  complete(request: LlmRequest): Promise<LlmResponse>;
}
