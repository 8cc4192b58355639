import { z } from 'zod';
import { errorMessage, ToolPolicyError } from '../errors.js';
import { redactSecrets } from '../text/redact.js';
import type { ToolCall, ToolSpec } from './tool-call.js';

/**
 * One registry for every agent tool: a zod input schema (with `.describe()` on each field, which
 * becomes the JSON schema the model reads), a read/write kind, and an `execute`. Failures go back to
 * the model as error results so it can correct itself; the registry never throws for a bad call.
 */

/** Who is asking and where. Tools get their services by closure from their factory, not from here. */
export interface ToolContext {
  threadId: string;
  actor: { id: string; name: string };
  signal?: AbortSignal;
  /** Shows a line on the thread's status card while the tool runs (a sub-agent's steps). */
  progress?: (status: string) => void | Promise<void>;
}

export interface ToolDefinition<Input extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  input: Input;
  /** Method syntax on purpose: it lets a specific tool stand in a `ToolDefinition[]`. */
  execute(input: z.output<Input>, context: ToolContext): Promise<string | object>;
}

interface ToolResult {
  content: string;
  isError: boolean;
}

export interface ToolRegistry {
  specs(): ToolSpec[];
  execute(call: ToolCall, context: ToolContext): Promise<ToolResult>;
}

/** Identity helper that infers the input type for `execute` from the schema. */
export function defineTool<Input extends z.ZodType>(
  definition: ToolDefinition<Input>,
): ToolDefinition<Input> {
  return definition;
}

/** Results beyond this are cut so one chatty tool cannot flood the model's context. */
export const MAX_TOOL_RESULT_CHARS = 16_000;

const toolNamePattern = /^[a-zA-Z0-9_-]{1,64}$/;

function toJsonSchema(schema: z.ZodType): Record<string, unknown> {
  // `io: 'input'` makes fields with defaults optional, which is what the model may send.
  const { $schema: _ignored, ...jsonSchema } = z.toJSONSchema(schema, { io: 'input' }) as Record<
    string,
    unknown
  >;
  return jsonSchema;
}

function formatIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(input)'}: ${issue.message}`)
    .join('; ');
}

function stringifyResult(result: string | object | undefined): string {
  // Redacted before the cut, so a cut never keeps the tail of a secret.
  const text = redactSecrets(
    typeof result === 'string' ? result : result === undefined ? 'ok' : JSON.stringify(result),
  );
  if (text.length <= MAX_TOOL_RESULT_CHARS) return text;
  return `${text.slice(0, MAX_TOOL_RESULT_CHARS)}\n… (cut: ${text.length - MAX_TOOL_RESULT_CHARS} more characters)`;
}

export function createToolRegistry(tools: ToolDefinition[]): ToolRegistry {
  const byName = new Map<string, ToolDefinition>();
  for (const tool of tools) {
    if (!toolNamePattern.test(tool.name)) throw new Error(`invalid tool name "${tool.name}"`);
    if (byName.has(tool.name)) throw new Error(`duplicate tool name "${tool.name}"`);
    byName.set(tool.name, tool);
  }
  const specs: ToolSpec[] = tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    parameters: toJsonSchema(tool.input),
  }));

  async function execute(call: ToolCall, context: ToolContext): Promise<ToolResult> {
    const tool = byName.get(call.name);
    if (tool === undefined) {
      return {
        isError: true,
        content: `Error: unknown tool "${call.name}". Available tools: ${[...byName.keys()].join(', ')}.`,
      };
    }
    let raw: unknown;
    try {
      // Models send "" for tools without parameters.
      raw = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
    } catch (error) {
      return {
        isError: true,
        content: `Error: the arguments for ${call.name} are not valid JSON (${errorMessage(error)}). Send one JSON object that matches the tool's schema.`,
      };
    }
    const parsed = tool.input.safeParse(raw);
    if (!parsed.success) {
      return {
        isError: true,
        content: `Error: invalid arguments for ${call.name}: ${formatIssues(parsed.error)}. Fix these fields and call the tool again.`,
      };
    }
    try {
      return { isError: false, content: stringifyResult(await tool.execute(parsed.data, context)) };
    } catch (error) {
      // Policy refusals are answers too: the model should explain them to the people in the thread.
      const prefix = error instanceof ToolPolicyError ? `Refused (${error.code})` : 'Error';
      return { isError: true, content: `${prefix}: ${errorMessage(error)}` };
    }
  }

  return {
    specs: () => specs,
    execute,
  };
}
