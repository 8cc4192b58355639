import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Whose LLM call this is: the thread it serves and, for a person's turn, that person. A turn (or a
 * triage, or a compaction) runs inside a scope, and every provider call made under it — the agent loop,
 * a tool's sub-agent, anything a tool calls — is billed to that scope at the provider boundary without
 * passing it through every layer.
 */
export interface LlmScope {
  threadId: string;
  person?: { id: string; name: string };
}

const storage = new AsyncLocalStorage<LlmScope>();

export function runInLlmScope<T>(scope: LlmScope, work: () => Promise<T>): Promise<T> {
  return storage.run(scope, work);
}

export function currentLlmScope(): LlmScope | undefined {
  return storage.getStore();
}
