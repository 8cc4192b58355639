import type { LlmUsage } from '../agent/metered-provider.js';
import { isApprover } from '../bot/approvers.js';
import type { ChatUser } from '../bot/chat-adapter.js';
import { stripLeadingMention } from '../commands/parse-command.js';
import type { Logger } from '../logger.js';
import { DAY_KEEP_DAYS, type GroupTotal, type LlmLedger, type ThreadLlmSpend } from './llm-ledger.js';
import { table } from './usage.js';

/**
 * The LLM budget: each thread has a dollar cap (`SHEPHERD_LLM_BUDGET_USD_THREAD`, raised per thread by
 * an approver's `budget +N`), with warnings in the thread at 50 %, 80 % and 100 %; past it, agent turns
 * there are refused (plain commands still work). A person may also have a daily cap across threads.
 * A turn already running when the cap is reached finishes (its tool rounds are bounded).
 */

/** Dollars with cents, or with four decimals under a dollar (one call often costs a fraction of a cent). */
function formatLlmDollars(value: number): string {
  return `$${value >= 1 || value === 0 ? value.toFixed(2) : value.toFixed(4)}`;
}

const formatTokens = (value: number) =>
  value >= 10_000 ? `${(value / 1000).toFixed(0)}k` : value.toLocaleString('en-US');

type BudgetCommand =
  | { name: 'budget-show' }
  | { name: 'budget-raise'; byUsd: number }
  | { name: 'spend-llm'; days: number }
  | { name: 'invalid'; command: string; error: string };

function parseBudgetCommand(text: string, botName: string): BudgetCommand | undefined {
  const tokens = stripLeadingMention(text, botName)
    .replace(/^\//, '')
    .split(/\s+/)
    .filter((token) => token !== '');
  const [head, ...rest] = tokens;
  const verb = head?.toLowerCase();
  if (verb === 'budget') {
    if (rest.length === 0) return { name: 'budget-show' };
    const match = rest.length === 1 ? /^\+\$?(\d+(?:\.\d+)?)$/.exec(rest[0] ?? '') : null;
    const byUsd = Number(match?.[1]);
    if (match === null || !(byUsd > 0) || byUsd > 10_000)
      return {
        name: 'invalid',
        command: 'budget',
        error: 'raise the cap with `budget +N` (dollars, e.g. +5)',
      };
    return { name: 'budget-raise', byUsd };
  }
  if (verb !== 'spend' || !rest.some((token) => token === '--llm')) return undefined;
  let days = 1;
  for (let index = 0; index < rest.length; index += 1) {
    const token = rest[index] ?? '';
    if (token === '--llm') continue;
    const [flag, inline] = token.includes('=') ? token.split('=', 2) : [token, undefined];
    const value = inline ?? rest[++index];
    if (flag !== '--days')
      return { name: 'invalid', command: 'spend --llm', error: `unknown option ${flag}; use --days N` };
    if (value === undefined || !/^\d+$/.test(value) || Number(value) === 0 || Number(value) > DAY_KEEP_DAYS)
      return { name: 'invalid', command: 'spend --llm', error: `--days takes 1 to ${DAY_KEEP_DAYS}` };
    days = Number(value);
  }
  return { name: 'spend-llm', days };
}

interface LlmBudgetOptions {
  ledger: LlmLedger;
  /** Posts a notice once per key (a retried call never warns twice). */
  postOnce(key: string, threadId: string, text: string): Promise<unknown>;
  personDayCapUsd: number | undefined;
  /** `SHEPHERD_APPROVERS`; empty means anyone may raise a cap, as anyone may approve. */
  approvers: readonly string[];
  botName: string;
  logger: Logger;
}

export function createLlmBudget(options: LlmBudgetOptions) {
  const { ledger, botName } = options;
  const raiseHint = `\`@${botName} budget +5\``;
  const spentText = (spend: ThreadLlmSpend) =>
    `${formatLlmDollars(spend.usd)} of its ${formatLlmDollars(spend.capUsd)} LLM budget`;

  function warning(spend: ThreadLlmSpend, percent: number): string {
    if (percent >= 100)
      return `LLM budget: this thread has used ${spentText(spend)} (100 %). I will not start new agent turns here until an approver raises the cap with ${raiseHint}; plain commands still work.`;
    return `LLM budget: this thread has used ${spentText(spend)} (${percent} %). At 100 % agent turns here stop until an approver raises the cap with ${raiseHint}.`;
  }

  async function onUsage(usage: LlmUsage): Promise<void> {
    if (usage.scope === undefined) {
      options.logger.debug({ model: usage.model }, 'llm call outside any thread: not billed to one');
      return;
    }
    const { threadId, person } = usage.scope;
    const recorded = await ledger.record({ ...usage, threadId, ...(person === undefined ? {} : { person }) });
    const highest = recorded.crossed.at(-1);
    if (highest === undefined) return;
    options.logger.info({ threadId, percent: highest, usd: recorded.spend.usd }, 'llm budget warning');
    await options.postOnce(
      `llm-budget:${threadId}:${recorded.spend.capUsd}:${highest}`,
      threadId,
      warning(recorded.spend, highest),
    );
  }

  /**
   * Why an agent turn for `actor` in `threadId` is refused, or undefined when it may run. `threadFields`:
   * the thread's spend key (`spendKey`) as already read, so it is not read again.
   */
  async function refusal(
    threadId: string,
    actor: ChatUser,
    threadFields?: Record<string, string>,
  ): Promise<string | undefined> {
    const spend =
      threadFields === undefined ? await ledger.thread(threadId) : ledger.parseThread(threadFields);
    if (spend.usd >= spend.capUsd)
      return `This thread has used ${spentText(spend)}, so I am not starting an agent turn. An approver can raise the cap with ${raiseHint}. Plain commands (help, runs, status <run>…) still work.`;
    const cap = options.personDayCapUsd;
    if (cap === undefined) return undefined;
    const today = await ledger.personToday(actor.id);
    if (today < cap) return undefined;
    return `${actor.name}, you have used ${formatLlmDollars(today)} of your ${formatLlmDollars(cap)} daily LLM budget (UTC day), so I am not starting an agent turn for you; it resets at 00:00 UTC. Plain commands still work.`;
  }

  /** The `session` line: this thread's tokens, dollars and cap. */
  async function sessionLine(threadId: string): Promise<string> {
    const spend = await ledger.thread(threadId);
    return `LLM spend: ${formatLlmDollars(spend.usd)} of ${formatLlmDollars(spend.capUsd)} (${spend.calls} call${spend.calls === 1 ? '' : 's'}, ${formatTokens(spend.inputTokens)} tokens in, ${formatTokens(spend.outputTokens)} out).`;
  }

  function report(days: number, totals: { people: GroupTotal[]; threads: GroupTotal[] }): string {
    const period = days === 1 ? 'today (UTC)' : `the last ${days} days (UTC, today included)`;
    if (totals.threads.length === 0) return `No LLM spend recorded ${period}.`;
    const rows = (groups: GroupTotal[]) =>
      groups
        .slice(0, 20)
        .map((group) => [
          group.label,
          formatTokens(group.inputTokens),
          formatTokens(group.outputTokens),
          formatLlmDollars(group.usd),
        ]);
    const total = totals.threads.reduce((sum, group) => sum + group.usd, 0);
    return [
      `LLM spend over ${period}: ${formatLlmDollars(total)} in all.`,
      'By person:',
      totals.people.length === 0 ? '(none)' : table(['person', 'tokens in', 'out', '$'], rows(totals.people)),
      'By thread:',
      table(['thread', 'tokens in', 'out', '$'], rows(totals.threads)),
    ].join('\n');
  }

  async function execute(command: BudgetCommand, threadId: string, actor: ChatUser): Promise<string> {
    switch (command.name) {
      case 'budget-show':
        return `This thread has used ${spentText(await ledger.thread(threadId))}. An approver raises it with ${raiseHint}.`;
      case 'budget-raise': {
        if (options.approvers.length > 0 && !isApprover(options.approvers, threadId, actor))
          return `Only approvers (${options.approvers.join(', ')}) can raise this thread's LLM budget; the cap stays as it is.`;
        const capUsd = await ledger.raiseCap(threadId, command.byUsd);
        const spend = await ledger.thread(threadId);
        options.logger.info({ threadId, by: actor.id, capUsd }, 'llm budget raised');
        return `${actor.name} raised this thread's LLM budget by ${formatLlmDollars(command.byUsd)} to ${formatLlmDollars(capUsd)} (${formatLlmDollars(spend.usd)} used); agent turns can go on.`;
      }
      case 'spend-llm':
        return report(command.days, await ledger.totals(command.days));
      case 'invalid':
        return `\`${command.command}\`: ${command.error}`;
    }
  }

  return {
    onUsage,
    refusal,
    spendKey: ledger.threadKey,
    sessionLine,
    async tryCommand(threadId: string, text: string, actor: ChatUser): Promise<string | undefined> {
      const command = parseBudgetCommand(text, botName);
      return command === undefined ? undefined : execute(command, threadId, actor);
    },
  };
}

export type LlmBudget = ReturnType<typeof createLlmBudget>;
