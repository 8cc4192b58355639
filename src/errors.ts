/**
 * The typed error family. Every error sets `name` because BullMQ matches failures by name across
 * processes, and every error has a stable `code` that logs and tests can match on.
 */
export class BotError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'BotError';
    this.code = code;
  }
}

/** A bad configuration value; stops start-up before anything connects. */
export class ConfigError extends BotError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('config_invalid', message, options);
    this.name = 'ConfigError';
  }
}

/** A chat platform call failed. `retryable` tells the notify queue whether another attempt can help. */
export class PlatformError extends BotError {
  readonly retryable: boolean;
  readonly platform: string;
  constructor(
    platform: string,
    code: string,
    message: string,
    options: { retryable: boolean; cause?: unknown },
  ) {
    super(code, message, options);
    this.name = 'PlatformError';
    this.platform = platform;
    this.retryable = options.retryable;
  }
}

/** The platform asked us to slow down; wait `retryAfterMs` before the next attempt. */
export class RateLimitedError extends PlatformError {
  readonly retryAfterMs: number;
  constructor(platform: string, retryAfterMs: number, options?: { cause?: unknown }) {
    super(platform, 'rate_limited', `${platform} rate limited; retry after ${retryAfterMs} ms`, {
      retryable: true,
      ...(options?.cause === undefined ? {} : { cause: options.cause }),
    });
    this.name = 'RateLimitedError';
    this.retryAfterMs = retryAfterMs;
  }
}

/** The LLM endpoint failed. Retryable for 429, 5xx, timeouts and connection errors. */
export class LlmError extends BotError {
  readonly isRetryable: boolean;
  readonly status: number | undefined;
  constructor(message: string, options: { isRetryable: boolean; status?: number; cause?: unknown }) {
    super('llm_error', message, options);
    this.name = 'LlmError';
    this.isRetryable = options.isRetryable;
    this.status = options.status;
  }
}

/** A tool call broke a policy (path outside the workspace, too many GPUs, …). */
export class ToolPolicyError extends BotError {
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'ToolPolicyError';
  }
}

/** An approval could not be applied (unknown, expired, already decided, not allowed). */
export class ApprovalError extends BotError {
  constructor(
    code: 'approval_unknown' | 'approval_expired' | 'approval_resolved' | 'approval_forbidden',
    message: string,
  ) {
    super(code, message);
    this.name = 'ApprovalError';
  }
}

/** A run operation failed (unknown run, illegal transition, executor failure). */
export class RunError extends BotError {
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'RunError';
  }
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
