import type { Redis } from 'ioredis';
import { z } from 'zod';
import { parseJsonWith } from '../text/json.js';
import { redactSecrets } from '../text/redact.js';

/**
 * What the agent did in a turn, for people: each LLM call (model, duration, tokens) and each tool call
 * (name, arguments, a summary of the result, duration). Kept per thread in Redis, newest last, capped.
 */

const traceLlmCall = z.object({
  kind: z.literal('llm'),
  model: z.string(),
  /** `turn` (first call) or `tool_round`. */
  reason: z.string(),
  durationMs: z.number(),
  inputTokens: z.number().optional(),
  outputTokens: z.number().optional(),
  toolCalls: z.number(),
  error: z.string().optional(),
});

const traceToolCall = z.object({
  kind: z.literal('tool'),
  name: z.string(),
  /** The arguments as JSON, cut to a readable length. */
  arguments: z.string(),
  /** The start of the result. */
  result: z.string(),
  isError: z.boolean(),
  durationMs: z.number(),
});

export type TraceStep = z.output<typeof traceLlmCall> | z.output<typeof traceToolCall>;

/** A turn as stored (read back against this schema: an entry of another shape is skipped). */
const turnTraceSchema = z.object({
  id: z.string(),
  threadId: z.string(),
  startedAt: z.number(),
  endedAt: z.number(),
  outcome: z.string(),
  /** The answer posted for the turn (cut), to place the trace under it. */
  reply: z.string(),
  steps: z.array(z.discriminatedUnion('kind', [traceLlmCall, traceToolCall])),
});
type TurnTrace = z.output<typeof turnTraceSchema>;

const MAX_TURNS = 50;
const TTL_SECONDS = 30 * 24 * 3600;
const ARGUMENT_CHARS = 600;
const RESULT_CHARS = 300;
const REPLY_CHARS = 4000;

function cut(text: string, limit: number): string {
  return text.length > limit ? `${text.slice(0, limit)}…` : text;
}

export function summarizeArguments(input: unknown): string {
  let text: string;
  try {
    text = typeof input === 'string' ? input : JSON.stringify(input);
  } catch {
    text = String(input);
  }
  return cut(redactSecrets(text ?? ''), ARGUMENT_CHARS);
}

export function summarizeResult(content: string): string {
  return cut(redactSecrets(content).replace(/\s+/g, ' ').trim(), RESULT_CHARS);
}

export interface TurnTraceStore {
  record(trace: TurnTrace): Promise<void>;
  /** Oldest first. */
  list(threadId: string): Promise<TurnTrace[]>;
}

export function createTurnTraceStore(options: { redis: Redis; prefix: string }): TurnTraceStore {
  const key = (threadId: string) => `${options.prefix}:turns:${threadId}`;
  return {
    async record(trace) {
      const stored: TurnTrace = { ...trace, reply: cut(trace.reply, REPLY_CHARS) };
      await options.redis
        .multi()
        .rpush(key(trace.threadId), JSON.stringify(stored))
        .ltrim(key(trace.threadId), -MAX_TURNS, -1)
        .expire(key(trace.threadId), TTL_SECONDS)
        .exec();
    },
    async list(threadId) {
      const raw = await options.redis.lrange(key(threadId), 0, -1);
      return raw.flatMap((entry) => {
        const trace = parseJsonWith(turnTraceSchema, entry);
        return trace === undefined ? [] : [trace];
      });
    },
  };
}
