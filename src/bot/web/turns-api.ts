import type { TurnTraceStore } from '../../agent/turn-trace.js';
import { decodeThreadId, encodeThreadId } from '../chat-adapter.js';
import { decodePathPart, sendJson, type WebRoute, WebRouteError } from './web-json.js';
import type { WebStore } from './web-store.js';

/** `GET /api/threads/:id/turns`: the trace of each agent turn in a playground thread (see turn-trace.ts). */
export function createWebTurnsRoutes(options: { store: WebStore; traces: TurnTraceStore }) {
  async function threadIdOf(parameter: string): Promise<string> {
    if (parameter.startsWith('web:')) {
      try {
        const reference = decodeThreadId(parameter);
        if (reference.platform === 'web') return parameter;
      } catch {
        // falls through to the 404
      }
      throw new WebRouteError(404, `no playground thread ${parameter}`);
    }
    const root = await options.store.getMessage(parameter);
    if (root === undefined || root.threadId !== root.id) {
      throw new WebRouteError(404, `no playground thread ${parameter}`);
    }
    return encodeThreadId({ platform: 'web', channel: root.channel, thread: root.id });
  }

  const route: WebRoute = async (_request, response, method, path) => {
    const match = /^\/api\/threads\/([^/]+)\/turns$/.exec(path);
    if (method !== 'GET' || match?.[1] === undefined) return false;
    try {
      const threadId = await threadIdOf(decodePathPart(match[1], 'threadId'));
      sendJson(response, 200, { threadId, turns: await options.traces.list(threadId) });
    } catch (error) {
      if (!(error instanceof WebRouteError)) throw error;
      sendJson(response, error.status, { error: error.message });
    }
    return true;
  };
  return { name: 'turns', route };
}
