import { redactRepeated, redactSecrets } from '../text/redact.js';
import type { LlmProvider, LlmRequest } from './llm-provider.js';
import type { ChatMessage } from './messages.js';
import { untrustedBlock } from './untrusted.js';

/**
 * The provider boundary: everything sent to a model (system prompt, people's messages, tool results,
 * triage snapshots, earlier tool-call arguments) is redacted on its way out, whatever produced it, and
 * what people wrote and what tools returned is wrapped in a boundary its content cannot close.
 */
function redactMessage(message: ChatMessage): ChatMessage {
  switch (message.role) {
    case 'user': {
      const content = redactSecrets(message.content);
      // What Shepherd writes itself (`[system]` notices, triage prompts) has no author id and is trusted;
      // people's chat messages always carry one and are data. Triage prompts fence their run data inside.
      if (message.authorId === undefined) return { ...message, content };
      return { ...message, content: untrustedBlock('message', content) };
    }
    case 'tool':
      return {
        ...message,
        content: untrustedBlock('tool-result', redactSecrets(message.content), { tool: message.name }),
      };
    case 'assistant':
      return {
        ...message,
        content: redactSecrets(message.content),
        ...(message.toolCalls === undefined
          ? {}
          : {
              toolCalls: message.toolCalls.map((call) => ({
                ...call,
                arguments: redactSecrets(call.arguments),
              })),
            }),
      };
  }
}

function redactLlmRequest(request: LlmRequest): LlmRequest {
  return {
    ...request,
    system: redactRepeated(request.system),
    messages: request.messages.map(redactMessage),
  };
}

export function createRedactingProvider(inner: LlmProvider): LlmProvider {
  return { complete: (request) => inner.complete(redactLlmRequest(request)) };
}
