import { DiscordAPIError, HTTPError, RateLimitError } from 'discord.js';
import { errorMessage, PlatformError, type PlatformErrorCode, RateLimitedError } from '../../errors.js';

/*
 * One place that turns discord.js / REST failures into the typed family the notify queue understands:
 * 5xx and network errors retry (1 s, 2 s, 4 s), permission and unknown-target errors are final.
 */

/** Discord JSON error codes that no retry can fix, with the stable `code` we log them under. */
const FINAL_API_CODES: ReadonlyMap<number, PlatformErrorCode> = new Map<number, PlatformErrorCode>([
  [10003, 'unknown_channel'],
  [10008, 'unknown_message'],
  [10062, 'unknown_interaction'],
  [50001, 'missing_access'],
  [50013, 'missing_permissions'],
  [50035, 'invalid_form_body'],
  [160002, 'thread_locked'],
]);

/** Map any error thrown by a discord.js call to a `PlatformError` (or `RateLimitedError`). */
export function toPlatformError(error: unknown, operation: string): PlatformError {
  if (error instanceof PlatformError) return error;
  const describe = (detail: string) => `discord ${operation} failed: ${detail}`;
  if (error instanceof RateLimitError) {
    return new RateLimitedError('discord', Math.max(error.retryAfter, error.timeToReset), { cause: error });
  }
  if (error instanceof DiscordAPIError) {
    const apiCode = typeof error.code === 'number' ? error.code : undefined;
    const known = apiCode === undefined ? undefined : FINAL_API_CODES.get(apiCode);
    if (known !== undefined) {
      return new PlatformError('discord', known, describe(`${error.message} (${apiCode})`), {
        retryable: false,
        cause: error,
      });
    }
    if (error.status >= 500) {
      return new PlatformError('discord', 'server_error', describe(`HTTP ${error.status}`), {
        retryable: true,
        cause: error,
      });
    }
    if (error.status === 429) return new RateLimitedError('discord', 1000, { cause: error });
    return new PlatformError(
      'discord',
      'request_rejected',
      describe(`HTTP ${error.status}: ${error.message}`),
      {
        retryable: false,
        cause: error,
      },
    );
  }
  if (error instanceof HTTPError) {
    const retryable = error.status >= 500 || error.status === 408;
    return new PlatformError(
      'discord',
      retryable ? 'server_error' : 'request_rejected',
      describe(`HTTP ${error.status}`),
      {
        retryable,
        cause: error,
      },
    );
  }
  // Anything else from the transport (connection reset, DNS, timeout abort) is worth another attempt.
  return new PlatformError('discord', 'network_error', describe(errorMessage(error)), {
    retryable: true,
    cause: error,
  });
}
