import type { ServerResponse } from 'node:http';
import {
  argumentsText,
  chunks,
  nextId,
  type ReplyStep,
  type ScriptedLlmServer,
  type ScriptedServerOptions,
  type ScriptedToolCall,
  startScriptedServer,
  type WireFormat,
  writeSse,
} from './scripted-server.js';

/** tool_use input must be an object on the wire; an unparsable string becomes `{ _raw }`. */
function inputObject(call: ScriptedToolCall): Record<string, unknown> {
  if (typeof call.arguments !== 'string') return call.arguments as Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(call.arguments);
    if (parsed !== null && typeof parsed === 'object') return parsed as Record<string, unknown>;
  } catch {
    // fall through
  }
  return { _raw: call.arguments };
}

const anthropicFormat: WireFormat = {
  path: '/v1/messages',

  lastUserText(body) {
    const messages = Array.isArray(body.messages) ? (body.messages as Array<Record<string, unknown>>) : [];
    for (let index = messages.length - 1; index >= 0; index -= 1) {
      const message = messages[index];
      if (message?.role !== 'user') continue;
      if (typeof message.content === 'string') return message.content;
      if (Array.isArray(message.content)) {
        const texts = (message.content as Array<Record<string, unknown>>)
          .filter((block) => block.type === 'text' && typeof block.text === 'string')
          .map((block) => block.text as string);
        if (texts.length > 0) return texts.join('\n');
      }
    }
    return undefined;
  },

  errorBody(status) {
    const type = status === 429 ? 'rate_limit_error' : status >= 500 ? 'api_error' : 'invalid_request_error';
    return { type: 'error', error: { type, message: `scripted error ${status}` } };
  },

  writeReply(response: ServerResponse, body, step: ReplyStep, stream) {
    const id = nextId('msg');
    const model = typeof body.model === 'string' ? body.model : 'scripted';
    const content: Array<Record<string, unknown>> = [];
    if (step.text !== undefined && step.text !== '') content.push({ type: 'text', text: step.text });
    const calls = (step.toolCalls ?? []).map((call) => ({ call, id: call.id ?? nextId('toolu') }));
    for (const { call, id: toolId } of calls) {
      content.push({ type: 'tool_use', id: toolId, name: call.name, input: inputObject(call) });
    }
    const stopReason = calls.length > 0 ? 'tool_use' : 'end_turn';
    const usage = { input_tokens: 10, output_tokens: 5 };

    if (!stream) {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          id,
          type: 'message',
          role: 'assistant',
          model,
          content,
          stop_reason: stopReason,
          stop_sequence: null,
          usage,
        }),
      );
      return;
    }

    const events: Array<{ event: string; data: unknown }> = [
      {
        event: 'message_start',
        data: {
          type: 'message_start',
          message: {
            id,
            type: 'message',
            role: 'assistant',
            model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: 10, output_tokens: 1 },
          },
        },
      },
    ];
    let index = 0;
    if (step.text !== undefined && step.text !== '') {
      events.push({
        event: 'content_block_start',
        data: { type: 'content_block_start', index, content_block: { type: 'text', text: '' } },
      });
      for (const part of chunks(step.text)) {
        events.push({
          event: 'content_block_delta',
          data: { type: 'content_block_delta', index, delta: { type: 'text_delta', text: part } },
        });
      }
      events.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index } });
      index += 1;
    }
    for (const { call, id: toolId } of calls) {
      events.push({
        event: 'content_block_start',
        data: {
          type: 'content_block_start',
          index,
          content_block: { type: 'tool_use', id: toolId, name: call.name, input: {} },
        },
      });
      const json =
        typeof call.arguments === 'string' ? JSON.stringify(inputObject(call)) : argumentsText(call);
      for (const part of chunks(json)) {
        events.push({
          event: 'content_block_delta',
          data: {
            type: 'content_block_delta',
            index,
            delta: { type: 'input_json_delta', partial_json: part },
          },
        });
      }
      events.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index } });
      index += 1;
    }
    events.push(
      {
        event: 'message_delta',
        data: {
          type: 'message_delta',
          delta: { stop_reason: stopReason, stop_sequence: null },
          usage: { output_tokens: 5 },
        },
      },
      { event: 'message_stop', data: { type: 'message_stop' } },
    );
    writeSse(response, events);
  },
};

/** A scripted Anthropic Messages server (`POST /v1/messages`, JSON and SSE). */
export function startScriptedAnthropic(options: ScriptedServerOptions = {}): Promise<ScriptedLlmServer> {
  return startScriptedServer(anthropicFormat, options);
}
