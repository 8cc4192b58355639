import { definedOnly } from './defined-only.js';

/**
 * The typed error family. Every error sets `name` because BullMQ matches failures by name across
 * processes; every error has a `code` from its class's closed union (the compiler rejects any other) and
 * `retryable`, the one name for "another attempt can help" (queues fail fast when it is false).
 */
export abstract class BotError<Code extends string = string> extends Error {
  readonly code: Code;
  readonly retryable: boolean;
  constructor(code: Code, message: string, options?: { retryable?: boolean; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'BotError';
    this.code = code;
    this.retryable = options?.retryable ?? false;
  }
}

/** A bad configuration value; stops start-up before anything connects. */
export class ConfigError extends BotError<'config_invalid'> {
  constructor(message: string, options?: { cause?: unknown }) {
    super('config_invalid', message, options);
    this.name = 'ConfigError';
  }
}

type ServiceErrorCode =
  /** No Redis answers and none could be started. */
  | 'redis_unavailable'
  /** A post for a platform whose adapter is not running in this process (it may be starting). */
  | 'adapter_missing'
  /** Not a `platform:channel:thread` id; no attempt can fix it. */
  | 'thread_invalid'
  /** Another process is delivering the same alert right now. */
  | 'delivery_in_progress'
  /** A feature hook asked for before the features were composed (a bug in start-up order). */
  | 'not_ready';

/** A piece of Shepherd's own plumbing failed (Redis, the adapter table, thread ids, a delivery). */
export class ServiceError extends BotError<ServiceErrorCode> {
  constructor(code: ServiceErrorCode, message: string, options: { retryable: boolean; cause?: unknown }) {
    super(code, message, options);
    this.name = 'ServiceError';
  }
}

/** A code a platform's own API answered with (Slack's `channel_not_found`, …), passed on as is. */
type PlatformApiCode = string & { readonly platformApiCode: true };
export const platformApiCode = (code: string) => code as PlatformApiCode;

export type PlatformErrorCode =
  | 'rate_limited'
  | 'network_error'
  | 'server_error'
  | 'request_rejected'
  | 'invalid_auth'
  | 'invalid_upload'
  | 'upload_failed'
  | 'slack_error'
  | 'wrong_platform'
  | 'thread_invalid'
  | 'thread_unknown'
  | 'message_unknown'
  | 'store_unavailable'
  | 'file_too_large'
  | 'listen_failed'
  | 'card_invalid'
  | 'config_invalid'
  // Discord API errors no retry can fix (discord-errors.ts names them).
  | 'unknown_channel'
  | 'unknown_message'
  | 'unknown_interaction'
  | 'missing_access'
  | 'missing_permissions'
  | 'invalid_form_body'
  | 'thread_locked'
  | `http_${number}`
  | PlatformApiCode;

/** A chat platform call failed. */
export class PlatformError extends BotError<PlatformErrorCode> {
  readonly platform: string;
  constructor(
    platform: string,
    code: PlatformErrorCode,
    message: string,
    options: { retryable: boolean; cause?: unknown },
  ) {
    super(code, message, options);
    this.name = 'PlatformError';
    this.platform = platform;
  }
}

/** The platform asked us to slow down; wait `retryAfterMs` before the next attempt. */
export class RateLimitedError extends PlatformError {
  readonly retryAfterMs: number;
  constructor(platform: string, retryAfterMs: number, options?: { cause?: unknown }) {
    super(platform, 'rate_limited', `${platform} rate limited; retry after ${retryAfterMs} ms`, {
      retryable: true,
      ...definedOnly({ cause: options?.cause }),
    });
    this.name = 'RateLimitedError';
    this.retryAfterMs = retryAfterMs;
  }
}

/** The LLM endpoint failed. Retryable for 429, 5xx, timeouts and connection errors. */
export class LlmError extends BotError<'llm_error'> {
  readonly status: number | undefined;
  constructor(message: string, options: { retryable: boolean; status?: number; cause?: unknown }) {
    super('llm_error', message, options);
    this.name = 'LlmError';
    this.status = options.status;
  }
}

type ToolPolicyErrorCode =
  | 'gpu_limit'
  | 'path_outside_workspace'
  | 'playbook_outside'
  | 'playbook_unknown'
  | 'run_over'
  | 'script_not_found'
  | 'script_syntax_error'
  | 'script_too_large'
  // Alert rules and mutes asked for in chat (AlertRuleError).
  | 'invalid_rule'
  | 'unknown_detector'
  | 'too_many_rules'
  | 'unknown_rule'
  | 'cwd_not_found'
  | 'invalid_command'
  | 'invalid_input'
  | 'unknown_run_file'
  | 'bad_range'
  | 'edit_not_applied'
  | 'log_not_found'
  | 'pid_not_found'
  | 'run_change_forbidden'
  // Research: a fetch outside the Hub, docs and GitHub bases.
  | 'url_outside_sources';

/** A tool call broke a policy (path outside the workspace, too many GPUs, …). */
export class ToolPolicyError extends BotError<ToolPolicyErrorCode> {
  constructor(code: ToolPolicyErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'ToolPolicyError';
  }
}

type RunErrorCode =
  | 'gpus_unavailable'
  | 'illegal_transition'
  | 'invalid_run'
  | 'launch_failed'
  | 'run_busy'
  | 'run_finished'
  | 'run_meta_invalid'
  | 'run_not_found'
  | 'script_not_found'
  | 'slurm_command_failed'
  | 'slurm_submit_failed'
  | 'slurm_unavailable'
  | 'terminate_failed'
  | 'watched_run'
  | 'no_script'
  | 'unknown_environment'
  | 'slurm_job_not_found'
  // Backends (SHEPHERD_BACKENDS, `--on`): Kubernetes, HF Jobs and the router between them.
  | 'unknown_backend'
  | 'backend_unavailable'
  | 'backend_api_failed'
  | 'backend_job_not_found'
  // Sweeps.
  | 'name_taken'
  | 'busy';

/** Run errors that pass by themselves (a lock held by another change, a scheduler hiccup): worth a retry. */
const TRANSIENT_RUN_ERRORS: ReadonlySet<RunErrorCode> = new Set([
  'run_busy',
  'busy',
  'slurm_unavailable',
  'slurm_command_failed',
  'terminate_failed',
  'backend_unavailable',
  'backend_api_failed',
]);

/** A run operation failed (unknown run, illegal transition, executor failure). */
export class RunError extends BotError<RunErrorCode> {
  constructor(code: RunErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, { ...options, retryable: TRANSIENT_RUN_ERRORS.has(code) });
    this.name = 'RunError';
  }
}

/** A decision card's stored record (its subject or its decision) no longer matches its schema. */
export class DecisionRecordError extends BotError<'decision_record_invalid'> {
  readonly key: string;
  constructor(key: string, message: string, options?: { cause?: unknown }) {
    super('decision_record_invalid', message, options);
    this.name = 'DecisionRecordError';
    this.key = key;
  }
}

type ResearchErrorCode = 'url_refused' | 'fetch_failed' | 'bad_response';

/** A research tool could not fetch: a URL outside the allowed hosts, a failed request, an unreadable answer. */
export class ResearchError extends BotError<ResearchErrorCode> {
  readonly status: number | undefined;
  constructor(code: ResearchErrorCode, message: string, options: { status?: number; cause?: unknown } = {}) {
    super(code, message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ResearchError';
    this.status = options.status;
  }
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A Redis lease (lease.ts) could not be had within its wait; another holder has it. Worth a retry. */
export class LeaseError extends BotError<'lease_busy'> {
  readonly key: string;
  constructor(key: string, message: string) {
    super('lease_busy', message, { retryable: true });
    this.name = 'LeaseError';
    this.key = key;
  }
}

type HubPushErrorCode = 'no_model' | 'not_completed' | 'invalid_repo' | 'no_token' | 'hub_rejected';

/** Push to Hub refused before its card (no model, bad repo id, no token) or failed at the Hub. */
export class HubPushError extends BotError<HubPushErrorCode> {
  constructor(code: HubPushErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, { ...options, retryable: false });
    this.name = 'HubPushError';
  }
}
