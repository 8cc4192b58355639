import type { Logger } from '../logger.js';
import type { LlmProvider } from './llm-provider.js';
import { currentLlmScope, type LlmScope } from './llm-scope.js';

/** One answered call's tokens, the model that produced them and whose call it was. */
export interface LlmUsage {
  model: string;
  inputTokens: number;
  outputTokens: number;
  /** Absent when no scope was set (a call outside any thread); then nothing is billed to a thread. */
  scope?: LlmScope;
}

/**
 * Counts every answered call at the provider boundary, so whatever calls the model (turns, triage,
 * compaction, a sub-agent inside a tool) is metered. Metering failures are logged, never fatal: a
 * Redis hiccup must not lose the answer the call already paid for.
 */
export function createMeteredProvider(
  inner: LlmProvider,
  options: { defaultModel: string; onUsage(usage: LlmUsage): Promise<void>; logger: Logger },
): LlmProvider {
  return {
    async complete(request) {
      const scope = currentLlmScope();
      const response = await inner.complete(request);
      if (response.usage !== undefined) {
        const usage: LlmUsage = {
          model: request.model ?? options.defaultModel,
          inputTokens: response.usage.inputTokens,
          outputTokens: response.usage.outputTokens,
          ...(scope === undefined ? {} : { scope }),
        };
        await options
          .onUsage(usage)
          .catch((error: unknown) =>
            options.logger.warn({ err: error, reason: request.reason }, 'llm usage not recorded'),
          );
      }
      return response;
    },
  };
}
