import type { Redis } from 'ioredis';
import { redactSecrets } from '../text/redact.js';

/**
 * What the agent did in a turn, for people: each LLM call (model, duration, tokens) and each tool call
 * (name, arguments, a summary of the result, duration). Kept per thread in Redis, newest last, capped.
 */

interface TraceLlmCall {
  kind: 'llm';
  model: string;
  /** `turn` (first call) or `tool_round`. */
  reason: string;
  durationMs: number;
  inputTokens?: number;
  outputTokens?: number;
  toolCalls: number;
  error?: string;
}

interface TraceToolCall {
  kind: 'tool';
  name: string;
  /** The arguments as JSON, cut to a readable length. */
  arguments: string;
  /** The start of the result. */
  result: string;
  isError: boolean;
  durationMs: number;
}

export type TraceStep = TraceLlmCall | TraceToolCall;

interface TurnTrace {
  id: string;
  threadId: string;
  startedAt: number;
  endedAt: number;
  outcome: string;
  /** The answer posted for the turn (cut), to place the trace under it. */
  reply: string;
  steps: TraceStep[];
}

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
        try {
          return [JSON.parse(entry) as TurnTrace];
        } catch {
          return [];
        }
      });
    },
  };
}
