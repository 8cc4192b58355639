import type { ChatUser } from '../bot/chat-adapter.js';
import { splitCommandLine, stripLeadingMention } from '../commands/parse-command.js';
import { definedOnly } from '../defined-only.js';
import type { Logger } from '../logger.js';
import { userFacingError } from '../runs/operations/run-texts.js';
import type { SpendReports } from '../spend/spend-report.js';
import type { CompareRuns } from './compare-runs.js';
import { parseSweepTokens } from './sweep-grid.js';
import type { SweepService } from './sweep-service.js';

/**
 * Plain commands of sweeps, comparisons and spend (answered without the LLM): `sweep`, `sweep-status`,
 * `compare`, `spend`, and `pause|resume|stop <sweep name>`. Anything else returns undefined and goes on
 * to the run commands.
 */

const REFERENCE = /^[\w.-]{1,100}$/;

type Command =
  | { name: 'sweep'; tokens: string[]; command?: string[] }
  | { name: 'sweep-status'; sweep: string }
  | { name: 'sweep-control'; verb: 'pause' | 'resume' | 'stop'; sweep: string }
  | { name: 'compare'; references: string[]; steps?: { from: number; to: number } }
  | { name: 'spend'; days: number; by: 'person' | 'channel' }
  | { name: 'invalid'; command: string; error: string };

function parseSteps(value: string | undefined): { from: number; to: number } | string {
  const match = value === undefined ? null : /^(\d+)?\.\.(\d+)?$/.exec(value);
  if (match === null) return '--steps takes a range like 1000..2000';
  const steps = {
    from: match[1] === undefined ? 0 : Number(match[1]),
    to: match[2] === undefined ? Number.MAX_SAFE_INTEGER : Number(match[2]),
  };
  return steps.from > steps.to ? '--steps range is backwards' : steps;
}

function parse(text: string, botName: string): Command | undefined {
  const stripped = stripLeadingMention(text, botName).replace(/^\//, '');
  const tokens = stripped.split(/\s+/).filter((token) => token !== '');
  const [head, ...rest] = tokens;
  switch (head?.toLowerCase()) {
    case 'sweep': {
      // `sweep [options] -- <command…>` (chat clients turn `--` into an em dash), like `run`.
      const afterVerb = stripped.slice(stripped.toLowerCase().indexOf('sweep') + 'sweep'.length);
      const separator = /(?:^|\s)(?:--|—)(?:\s|$)/.exec(afterVerb);
      // Quotes group a flag's value (`--eval "python eval.py"`), as in `run`.
      if (separator === null) {
        const tokens = splitCommandLine(afterVerb);
        if (tokens === undefined) return { name: 'invalid', command: 'sweep', error: 'unbalanced quote' };
        return { name: 'sweep', tokens };
      }
      const command = splitCommandLine(afterVerb.slice(separator.index + separator[0].length));
      if (command === undefined)
        return { name: 'invalid', command: 'sweep', error: 'unbalanced quote in the command' };
      const flags = splitCommandLine(afterVerb.slice(0, separator.index));
      if (flags === undefined) return { name: 'invalid', command: 'sweep', error: 'unbalanced quote' };
      return { name: 'sweep', tokens: flags, command };
    }
    case 'sweep-status':
      return rest.length === 1 && REFERENCE.test(rest[0] ?? '')
        ? { name: 'sweep-status', sweep: rest[0] as string }
        : undefined;
    case 'pause':
    case 'resume':
    case 'stop':
      return rest.length === 1 && REFERENCE.test(rest[0] ?? '')
        ? { name: 'sweep-control', verb: head.toLowerCase() as 'pause', sweep: rest[0] as string }
        : undefined;
    case 'compare': {
      const references: string[] = [];
      let steps: { from: number; to: number } | undefined;
      for (let index = 0; index < rest.length; index += 1) {
        const token = rest[index] ?? '';
        if (token === '--steps' || token.startsWith('--steps=')) {
          const parsed = parseSteps(token.includes('=') ? token.slice('--steps='.length) : rest[++index]);
          if (typeof parsed === 'string') return { name: 'invalid', command: 'compare', error: parsed };
          steps = parsed;
        } else if (REFERENCE.test(token)) references.push(token);
        else return undefined;
      }
      // One run is a fork compared with its parent (the comparison refuses a run that is no fork).
      if (references.length === 0) return undefined;
      return { name: 'compare', references, ...definedOnly({ steps }) };
    }
    case 'spend': {
      let days = 30;
      let by: 'person' | 'channel' = 'person';
      for (let index = 0; index < rest.length; index += 1) {
        const token = rest[index] ?? '';
        const [flag, inline] = token.includes('=') ? token.split('=', 2) : [token, undefined];
        const value = inline ?? rest[++index];
        if (flag === '--days') {
          if (value === undefined || !/^\d+$/.test(value) || Number(value) === 0 || Number(value) > 3660)
            return { name: 'invalid', command: 'spend', error: '--days takes a whole number of days' };
          days = Number(value);
        } else if (flag === '--by') {
          if (value !== 'person' && value !== 'channel')
            return { name: 'invalid', command: 'spend', error: '--by is person or channel' };
          by = value;
        } else if (index === 0 && !token.startsWith('--')) return undefined;
        else
          return {
            name: 'invalid',
            command: 'spend',
            error: `unknown option ${flag}; use --days N, --by person|channel`,
          };
      }
      return { name: 'spend', days, by };
    }
    default:
      return undefined;
  }
}

export function createSweepCommands(options: {
  sweeps: SweepService;
  compare: CompareRuns;
  spend: SpendReports;
  botName: string;
  logger: Logger;
}) {
  async function execute(command: Command, threadId: string, actor: ChatUser): Promise<string | undefined> {
    switch (command.name) {
      case 'sweep': {
        const parsed = parseSweepTokens(command.tokens, command.command);
        if (parsed === undefined) return undefined;
        if (!parsed.ok) return `\`sweep\`: ${parsed.error}`;
        return options.sweeps.create(parsed.spec, threadId, actor, 'command');
      }
      case 'sweep-status':
        return options.sweeps.status(command.sweep);
      case 'sweep-control':
        // A run (or a trial, by its own name) is handled by the run commands.
        if (!(await options.sweeps.isSweep(command.sweep))) return undefined;
        return options.sweeps[command.verb](command.sweep, actor, threadId);
      case 'compare':
        return options.compare({
          references: command.references,
          threadId,
          ...definedOnly({ steps: command.steps }),
        });
      case 'spend':
        return options.spend.report(command.days, command.by);
      case 'invalid':
        return `\`${command.command}\`: ${command.error}`;
    }
  }

  return {
    async tryHandle(threadId: string, text: string, actor: ChatUser): Promise<string | undefined> {
      const command = parse(text, options.botName);
      if (command === undefined) return undefined;
      try {
        return await execute(command, threadId, actor);
      } catch (error) {
        options.logger.info({ threadId, command: command.name, err: error }, 'command refused');
        return userFacingError(error);
      }
    },
  };
}
