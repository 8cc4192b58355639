import type { LlmProvider } from '../agent/llm-provider.js';
import { LlmError } from '../errors.js';
import type { OpsMetrics } from './ops-metrics.js';

/** The error kinds `shepherd_llm_errors_total` uses: coarse enough to alert on, fine enough to act on. */
function llmErrorKind(error: unknown): string {
  if (error instanceof LlmError) {
    const status = error.status;
    if (status === 429) return 'rate_limited';
    if (status === 401 || status === 403) return 'auth';
    if (status !== undefined && status >= 500) return 'server';
    if (status !== undefined && status >= 400) return 'request';
    if (/timed? ?out/i.test(error.message)) return 'timeout';
    return 'connection';
  }
  if (error instanceof Error && error.name === 'LlmAbortedError') return 'aborted';
  return 'other';
}

/** Counts tokens and final errors around any provider; calls are counted by the provider's own `onCall`. */
export function instrumentProvider(provider: LlmProvider, metrics: OpsMetrics, model: string): LlmProvider {
  return {
    async complete(request) {
      try {
        const response = await provider.complete(request);
        if (response.usage !== undefined) {
          metrics.llmTokens('input', model, response.usage.inputTokens);
          metrics.llmTokens('output', model, response.usage.outputTokens);
        }
        return response;
      } catch (error) {
        metrics.llmError(llmErrorKind(error));
        throw error;
      }
    },
  };
}
