/**
 * Slack Web API failures → the typed `PlatformError` family, so the notify queue can decide:
 * 429 → `RateLimitedError` (wait `Retry-After`), permanent Slack errors → fail fast, 5xx / network → retry.
 * Matches on the SDK's stable `code` strings rather than `instanceof`, so a second copy of
 * `@slack/web-api` in the tree cannot break the mapping.
 */
import { PlatformError, platformApiCode, RateLimitedError } from '../../errors.js';

/** Slack error codes that another attempt cannot fix. Unknown platform errors count as permanent too. */
const TRANSIENT_SLACK_ERRORS: ReadonlySet<string> = new Set([
  'internal_error',
  'fatal_error',
  'service_unavailable',
  'request_timeout',
  'ratelimited',
  'team_added_to_org',
]);

interface SdkErrorShape {
  code?: unknown;
  message?: unknown;
  retryAfter?: unknown;
  statusCode?: unknown;
  data?: { error?: unknown };
}

/** Map anything thrown by a `WebClient` call to a `PlatformError`. `context` names the call and thread for the log. */
export function toPlatformError(error: unknown, context: string): PlatformError {
  if (error instanceof PlatformError) return error;
  const shape: SdkErrorShape = typeof error === 'object' && error !== null ? (error as SdkErrorShape) : {};
  const message = typeof shape.message === 'string' ? shape.message : String(error);
  switch (shape.code) {
    case 'slack_webapi_rate_limited_error': {
      const seconds = typeof shape.retryAfter === 'number' && shape.retryAfter >= 0 ? shape.retryAfter : 1;
      return new RateLimitedError('slack', seconds * 1000, { cause: error });
    }
    case 'slack_webapi_platform_error': {
      const slackCode = typeof shape.data?.error === 'string' ? shape.data.error : 'unknown_error';
      return new PlatformError('slack', platformApiCode(slackCode), `slack ${context}: ${slackCode}`, {
        retryable: TRANSIENT_SLACK_ERRORS.has(slackCode),
        cause: error,
      });
    }
    case 'slack_webapi_http_error': {
      const status = typeof shape.statusCode === 'number' ? shape.statusCode : 0;
      return new PlatformError('slack', `http_${status}`, `slack ${context}: HTTP ${status}`, {
        retryable: status >= 500 || status === 408,
        cause: error,
      });
    }
    case 'slack_webapi_request_error':
      return new PlatformError('slack', 'network_error', `slack ${context}: ${message}`, {
        retryable: true,
        cause: error,
      });
    case 'slack_webapi_file_upload_invalid_args_error':
    case 'slack_webapi_file_upload_read_file_data_error':
      return new PlatformError('slack', 'invalid_upload', `slack ${context}: ${message}`, {
        retryable: false,
        cause: error,
      });
    default:
      // A plain Error from the SDK (e.g. the upload URL answering non-200) is most likely transient.
      return new PlatformError('slack', 'slack_error', `slack ${context}: ${message}`, {
        retryable: true,
        cause: error,
      });
  }
}
