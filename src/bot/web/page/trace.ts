import { make } from './dom.js';
import type { Message, TraceStep, TurnTrace } from './types.js';

/** The collapsed trace under a bot answer: what the agent did in that turn (LLM calls, tool calls). */

const openTraces = new Set<string>();

function seconds(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** Which bot message answers which turn: the one with the turn's reply text, else the first one after it began. */
export function placeTraces(
  messages: Message[],
  turns: TurnTrace[],
  botUser: string,
): Map<string, TurnTrace> {
  const placed = new Map<string, TurnTrace>();
  const bot = messages.filter((message) => message.user === botUser && !message.card);
  for (const turn of turns) {
    const free = bot.filter((message) => !placed.has(message.id));
    const byText = free.find((message) => message.text.trim() === turn.reply.trim());
    const byTime = free.find((message) => message.ts >= turn.startedAt - 1000);
    const target = byText ?? byTime;
    if (target !== undefined) placed.set(target.id, turn);
  }
  return placed;
}

function renderStep(step: TraceStep): HTMLElement {
  const item = make('li', `trace-step ${step.kind}${step.kind === 'tool' && step.isError ? ' failed' : ''}`);
  if (step.kind === 'llm') {
    const tokens =
      step.inputTokens === undefined
        ? ''
        : ` · ${step.inputTokens} in / ${step.outputTokens ?? 0} out tokens`;
    const calls =
      step.toolCalls > 0 ? ` · asked for ${step.toolCalls} tool call${step.toolCalls === 1 ? '' : 's'}` : '';
    item.append(make('span', 'trace-kind', 'LLM'), make('span', 'trace-name', step.model));
    item.append(make('span', 'trace-info', ` ${seconds(step.durationMs)}${tokens}${calls}`));
    if (step.error) item.append(make('div', 'trace-result error', step.error));
    return item;
  }
  item.dataset.tool = step.name;
  item.append(make('span', 'trace-kind', 'tool'), make('span', 'trace-name', step.name));
  item.append(make('span', 'trace-info', ` ${seconds(step.durationMs)}${step.isError ? ' · error' : ''}`));
  item.append(make('pre', 'trace-args', step.arguments));
  item.append(make('div', 'trace-result', step.result));
  return item;
}

export function renderTrace(turn: TurnTrace): HTMLElement {
  const details = make('details', 'trace');
  details.dataset.testid = 'trace';
  details.open = openTraces.has(turn.id);
  details.addEventListener('toggle', () => {
    if (details.open) openTraces.add(turn.id);
    else openTraces.delete(turn.id);
  });
  const llm = turn.steps.filter((step) => step.kind === 'llm').length;
  const tools = turn.steps
    .filter((step) => step.kind === 'tool')
    .map((step) => (step.kind === 'tool' ? step.name : ''));
  const summary = make(
    'summary',
    null,
    `trace · ${llm} LLM call${llm === 1 ? '' : 's'} · ${tools.length === 0 ? 'no tools' : tools.join(', ')} · ${seconds(turn.endedAt - turn.startedAt)}`,
  );
  const list = make('ol', 'trace-steps');
  for (const step of turn.steps) list.append(renderStep(step));
  details.append(summary, list);
  return details;
}
