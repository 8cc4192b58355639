import type { ServerResponse } from 'node:http';
import {
  argumentsText,
  chunks,
  nextId,
  type ReplyStep,
  type ScriptedLlmServer,
  type ScriptedServerOptions,
  startScriptedServer,
  type WireFormat,
  writeSse,
} from './scripted-server.js';

function textOf(content: unknown): string | undefined {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    const texts = content
      .filter(
        (part): part is { type: 'text'; text: string } =>
          part?.type === 'text' && typeof part.text === 'string',
      )
      .map((part) => part.text);
    return texts.length > 0 ? texts.join('') : undefined;
  }
  return undefined;
}

const openAiFormat: WireFormat = {
  path: '/v1/chat/completions',

  lastUserText(body) {
    const messages = Array.isArray(body.messages) ? (body.messages as Array<Record<string, unknown>>) : [];
    for (let index = messages.length - 1; index >= 0; index -= 1) {
      const message = messages[index];
      if (message?.role !== 'user') continue;
      const text = textOf(message.content);
      if (text !== undefined) return text;
    }
    return undefined;
  },

  errorBody(status) {
    return { error: { message: `scripted error ${status}`, type: 'server_error', code: null } };
  },

  writeReply(response: ServerResponse, body, step: ReplyStep, stream) {
    const id = nextId('chatcmpl');
    const created = Math.floor(Date.now() / 1000);
    const model = typeof body.model === 'string' ? body.model : 'scripted';
    const toolCalls = (step.toolCalls ?? []).map((call) => ({
      id: call.id ?? nextId('call'),
      type: 'function' as const,
      function: { name: call.name, arguments: argumentsText(call) },
    }));
    const finishReason = toolCalls.length > 0 ? 'tool_calls' : 'stop';
    const input = step.usage?.inputTokens ?? 10;
    const output = step.usage?.outputTokens ?? 5;
    const usage = { prompt_tokens: input, completion_tokens: output, total_tokens: input + output };

    if (!stream) {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model,
          choices: [
            {
              index: 0,
              message: {
                role: 'assistant',
                content: step.text ?? null,
                ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
                refusal: null,
              },
              finish_reason: finishReason,
              logprobs: null,
            },
          ],
          usage,
        }),
      );
      return;
    }

    const chunk = (delta: object, finish: string | null = null) => ({
      data: {
        id,
        object: 'chat.completion.chunk',
        created,
        model,
        choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
      },
    });
    const events = [chunk({ role: 'assistant', content: '' })];
    for (const part of chunks(step.text ?? '')) events.push(chunk({ content: part }));
    toolCalls.forEach((call, index) => {
      events.push(
        chunk({
          tool_calls: [
            { index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } },
          ],
        }),
      );
      for (const part of chunks(call.function.arguments)) {
        events.push(chunk({ tool_calls: [{ index, function: { arguments: part } }] }));
      }
    });
    events.push(chunk({}, finishReason));
    writeSse(response, events, '[DONE]');
  },
};

/** A scripted OpenAI-compatible server (`POST /v1/chat/completions`, JSON and SSE). */
export function startScriptedOpenAi(options: ScriptedServerOptions = {}): Promise<ScriptedLlmServer> {
  return startScriptedServer(openAiFormat, options);
}
