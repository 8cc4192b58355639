import type { ScriptedLlmServer } from './scripted-llm/index.js';

/** A tool result as the model gets it: inside its `<tool-result-NONCE tool="…">` boundary (issue 10 item 7). */
const TOOL_RESULT_BOUNDARY = /^<(tool-result-[0-9a-f]{12}) tool="[^"]*">\n([\s\S]*)\n<\/\1>$/;

/** The content of every tool result the model was sent, by tool call id, with its boundary checked and removed. */
export function toolResults(llm: ScriptedLlmServer): Map<string, string> {
  const results = new Map<string, string>();
  for (const request of llm.requests) {
    const messages = (request.body.messages ?? []) as Array<Record<string, unknown>>;
    for (const message of messages) {
      if (message.role === 'tool' && typeof message.tool_call_id === 'string') {
        const content = String(message.content);
        const inner = TOOL_RESULT_BOUNDARY.exec(content)?.[2];
        if (inner === undefined)
          throw new Error(`tool result outside its boundary: ${content.slice(0, 120)}`);
        results.set(message.tool_call_id, inner);
      }
    }
  }
  return results;
}
