import type { Config } from '../../config/config.js';
import { definedOnly } from '../../defined-only.js';
import type { Logger } from '../../logger.js';
import type { LlmProvider } from '../llm-provider.js';
import { createAnthropicProvider } from './anthropic-provider.js';
import { createHttpFetch } from './http-fetch.js';
import { DEFAULT_RETRY_POLICY } from './llm-retry.js';
import { createOpenAiProvider } from './openai-provider.js';

interface CreateLlmProviderOptions {
  logger: Logger;
  /** Called once per HTTP request (retries included), with the request's reason. */
  onCall?: (reason: string) => void;
  /** Backoff base; tests shorten it. Defaults to 500 ms. */
  retryBaseDelayMs?: number;
  /** Cap for backoff and `retry-after`. Defaults to 30 s. */
  retryMaxDelayMs?: number;
}

/** Pick the provider named by `SHEPHERD_LLM_PROVIDER`. */
export function createLlmProvider(
  llm: Pick<Config['llm'], 'provider' | 'baseUrl' | 'model' | 'apiKey' | 'timeoutMs' | 'maxRetries'>,
  options: CreateLlmProviderOptions,
): LlmProvider {
  const retry = {
    maxRetries: llm.maxRetries,
    baseDelayMs: options.retryBaseDelayMs ?? DEFAULT_RETRY_POLICY.baseDelayMs,
    maxDelayMs: options.retryMaxDelayMs ?? DEFAULT_RETRY_POLICY.maxDelayMs,
  };
  const logger = options.logger.child({ component: 'llm', provider: llm.provider });
  const common = {
    model: llm.model,
    apiKey: llm.apiKey,
    timeoutMs: llm.timeoutMs,
    retry,
    logger,
    // Keep-alive node:http instead of undici: a millisecond or two less per call (turn_overhead_p50_ms).
    fetch: createHttpFetch(),
    ...definedOnly({ onCall: options.onCall }),
  };
  if (llm.provider === 'anthropic') return createAnthropicProvider({ ...common, baseUrl: llm.baseUrl });
  return createOpenAiProvider({ ...common, baseUrl: llm.baseUrl });
}
