/*
 * The tool-call contract shared by the agent loop and the tool registry. It lives with the tools so the
 * registry does not depend on the agent.
 */

/** One tool invocation requested by the model. `arguments` is the raw JSON text the model produced. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** A tool as the model sees it: name, description and a JSON schema of its input. */
export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}
