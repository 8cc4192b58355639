import { errorMessage, LlmError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { redactedHead } from '../../text/redact.js';

/**
 * Our own retry loop around one SDK call (the SDKs' built-in retries are switched off so every HTTP
 * attempt is visible: counted through `onCall`, logged, and bounded by our backoff policy).
 */

export interface RetryPolicy {
  /** Retries after the first attempt. */
  maxRetries: number;
  baseDelayMs: number;
  /** Cap for exponential backoff and for a server's `retry-after`. */
  maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { maxRetries: 2, baseDelayMs: 500, maxDelayMs: 30_000 };

/** What a provider learns from a failed attempt. */
interface ClassifiedFailure {
  error: LlmError;
  retryAfterMs?: number;
}

/** The error classes both SDKs export with the same hierarchy. */
interface SdkErrorClasses {
  APIError: abstract new (
    ...parameters: never[]
  ) => Error & { status?: number | undefined; headers?: unknown };
  APIConnectionError: abstract new (...parameters: never[]) => Error;
  APIConnectionTimeoutError: abstract new (...parameters: never[]) => Error;
  APIUserAbortError: abstract new (...parameters: never[]) => Error;
}

/** Thrown unchanged when the caller aborted: not an endpoint failure, so no retry and no `LlmError`. */
class LlmAbortedError extends Error {
  constructor(cause?: unknown) {
    super('LLM request aborted', cause === undefined ? undefined : { cause });
    this.name = 'LlmAbortedError';
  }
}

/** Parse `retry-after-ms` / `retry-after` (seconds or an HTTP date) from SDK error headers. */
export function retryAfterFromHeaders(headers: unknown, now: number = Date.now()): number | undefined {
  if (headers === null || typeof headers !== 'object' || !('get' in headers)) return undefined;
  const get = (headers as { get(name: string): string | null }).get.bind(headers);
  const milliseconds = Number(get('retry-after-ms'));
  if (get('retry-after-ms') !== null && Number.isFinite(milliseconds) && milliseconds >= 0)
    return milliseconds;
  const value = get('retry-after');
  if (value === null) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Map an SDK error to an `LlmError`: 408/429/5xx, timeouts and connection errors are retryable. */
export function classifySdkError(
  error: unknown,
  classes: SdkErrorClasses,
  provider: string,
): ClassifiedFailure {
  if (error instanceof classes.APIUserAbortError) throw new LlmAbortedError(error);
  if (error instanceof classes.APIConnectionTimeoutError) {
    return { error: new LlmError(`${provider} request timed out`, { retryable: true, cause: error }) };
  }
  if (error instanceof classes.APIConnectionError) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
    return {
      error: new LlmError(`${provider} connection failed${cause}`, { retryable: true, cause: error }),
    };
  }
  if (error instanceof classes.APIError && typeof error.status === 'number') {
    const status = error.status;
    const retryable = status === 408 || status === 429 || status >= 500;
    const retryAfterMs = retryAfterFromHeaders(error.headers);
    const failure: ClassifiedFailure = {
      error: new LlmError(`${provider} returned HTTP ${status}: ${shorten(error.message)}`, {
        retryable,
        status,
        cause: error,
      }),
    };
    if (retryAfterMs !== undefined) failure.retryAfterMs = retryAfterMs;
    return failure;
  }
  if (error instanceof LlmError) return { error };
  return {
    error: new LlmError(`${provider} call failed: ${shorten(errorMessage(error))}`, {
      retryable: false,
      cause: error,
    }),
  };
}

function shorten(text: string, limit = 200): string {
  // Redacted before the cut: an endpoint's error body may echo the key it was sent.
  return redactedHead(text, limit + 1);
}

function sleep(milliseconds: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new LlmAbortedError(signal.reason));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(new LlmAbortedError(signal?.reason));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, milliseconds);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Backoff before retry number `retry` (0-based): base·2^retry with ±20 % jitter, capped. */
export function backoffDelay(retry: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const exponential = policy.baseDelayMs * 2 ** retry;
  const jittered = exponential * (0.8 + 0.4 * random());
  return Math.min(policy.maxDelayMs, Math.round(jittered));
}

interface RetryOptions {
  policy: RetryPolicy;
  provider: string;
  reason: string;
  logger: Logger;
  signal: AbortSignal | undefined;
  onCall: ((reason: string) => void) | undefined;
  classify: (error: unknown) => ClassifiedFailure;
}

/** Run `attempt` until it succeeds, a non-retryable error occurs, or retries run out. */
export async function withLlmRetries<T>(attempt: () => Promise<T>, options: RetryOptions): Promise<T> {
  for (let retry = 0; ; retry += 1) {
    if (options.signal?.aborted) throw new LlmAbortedError(options.signal.reason);
    options.onCall?.(options.reason);
    try {
      return await attempt();
    } catch (error) {
      if (options.signal?.aborted) throw new LlmAbortedError(options.signal.reason);
      const failure = options.classify(error);
      const canRetry = failure.error.retryable && retry < options.policy.maxRetries;
      if (!canRetry) {
        options.logger.warn(
          {
            provider: options.provider,
            reason: options.reason,
            attempts: retry + 1,
            err: failure.error.message,
          },
          'llm call failed',
        );
        throw failure.error;
      }
      const delay =
        failure.retryAfterMs === undefined
          ? backoffDelay(retry, options.policy)
          : Math.min(options.policy.maxDelayMs, failure.retryAfterMs);
      options.logger.info(
        {
          provider: options.provider,
          reason: options.reason,
          retry: retry + 1,
          delayMs: delay,
          err: failure.error.message,
        },
        'llm call failed; retrying',
      );
      await sleep(delay, options.signal);
    }
  }
}
