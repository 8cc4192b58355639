import { setPlacementFlag } from '../config/backend-kinds.js';
import { definedOnly } from '../defined-only.js';
import type { ForkRequest } from '../runs/operations/fork-config.js';
import type { RunFlags } from '../runs/operations/operation-types.js';
import { parseFork } from './parse-fork.js';
/**
 * Plain commands: the actions that need no LLM and keep working when it is down. Parsing is strict so
 * that natural language ("stop the run if the loss explodes") goes to the agent, not to a command.
 */

export type PlainCommand =
  | { name: 'help' }
  | { name: 'runs' }
  | { name: 'status'; run?: string; full?: boolean }
  | { name: 'pause' | 'stop'; run: string }
  | { name: 'resume'; run: string; on?: string }
  | { name: 'schedule'; run: string; cron: string }
  | { name: 'fork'; run: string; request: ForkRequest }
  | ({ name: 'run'; path?: string; command?: string[] } & RunCommandFlags)
  | { name: 'watch'; target: WatchTarget; runName?: string }
  | { name: 'chart'; run: string; metrics: string[]; steps?: { from: number; to: number } }
  | { name: 'alert'; run: string; rule: string }
  | { name: 'alert-remove'; run: string; ruleId: string }
  | { name: 'alerts'; run: string }
  | { name: 'mute'; run: string; detector: string; duration?: string }
  | { name: 'unmute'; run: string; detector: string }
  | { name: 'invalid'; command: string; error: string };

/** The flags of `run`, as the run operations take them. */
type RunCommandFlags = RunFlags;

export type WatchTarget =
  | { kind: 'slurm'; jobId: string }
  | { kind: 'log'; path: string; pid?: number }
  /** `watch k8s:<namespace>/<job>` (or `k8s:<job>` in the configured namespace). */
  | { kind: 'kubernetes'; namespace?: string; job: string }
  /** `watch hf:<job id>` (or `hf:<namespace>/<job id>`). */
  | { kind: 'hfjobs'; namespace?: string; jobId: string };

const KUBERNETES_TARGET =
  /^k8s:(?:([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\/)?([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)$/;
const HF_TARGET = /^hf:(?:([\w.-]{1,96})\/)?([\w-]{1,96})$/;

/** A remote job target, or undefined when the word is not one. */
function remoteWatchTarget(target: string): WatchTarget | undefined {
  const kubernetes = KUBERNETES_TARGET.exec(target);
  if (kubernetes !== null) {
    return { kind: 'kubernetes', job: kubernetes[3] as string, ...definedOnly({ namespace: kubernetes[1] }) };
  }
  const hf = HF_TARGET.exec(target);
  if (hf !== null) return { kind: 'hfjobs', jobId: hf[2] as string, ...definedOnly({ namespace: hf[1] }) };
  return undefined;
}

const MENTION = /^\s*(?:<@[A-Za-z0-9]+>|@[\w.-]+)[\s,:]*/;

/** Removes a leading bot mention (`@shepherd`, Slack `<@U123>`, Discord `<@123>`). */
export function stripLeadingMention(text: string, botName: string): string {
  const match = MENTION.exec(text);
  if (match === null) return text.trim();
  const mention = match[0].trim().replace(/[\s,:]+$/, '');
  const isOurs = mention.startsWith('<@') || mention.toLowerCase() === `@${botName.toLowerCase()}`;
  return isOurs ? text.slice(match[0].length).trim() : text.trim();
}

function tokenize(text: string): string[] {
  return text.split(/\s+/).filter((token) => token.length > 0);
}

/** A run reference: an id or a name (letters, digits, `-`, `_`, `.`). */
export const RUN_REFERENCE = /^[\w.-]{1,100}$/;

export function parsePlainCommand(rawText: string, botName = 'shepherd'): PlainCommand | undefined {
  const text = stripLeadingMention(rawText, botName).replace(/^\//, '');
  const tokens = tokenize(text);
  const [head, ...rest] = tokens;
  if (head === undefined) return undefined;
  const verb = head.toLowerCase();
  switch (verb) {
    case 'help':
      return rest.length === 0 ? { name: 'help' } : undefined;
    case 'runs':
      return rest.length === 0 ? { name: 'runs' } : undefined;
    case 'status':
      if (rest.length === 0) return { name: 'status' };
      if (rest.length === 2 && rest[1] === '--full' && RUN_REFERENCE.test(rest[0] ?? ''))
        return { name: 'status', run: rest[0] as string, full: true };
      return rest.length === 1 && RUN_REFERENCE.test(rest[0] ?? '')
        ? { name: 'status', run: rest[0] as string }
        : undefined;
    case 'resume':
      return parseResume(rest);
    case 'schedule':
      return parseSchedule(text.slice(head.length));
    case 'pause':
    case 'stop':
      return rest.length === 1 && RUN_REFERENCE.test(rest[0] ?? '')
        ? { name: verb, run: rest[0] as string }
        : undefined;
    case 'run':
      return parseRun(text.slice(head.length));
    case 'fork': {
      const parsed = parseFork(rest, RUN_REFERENCE);
      if (parsed === undefined || 'error' in parsed)
        return parsed === undefined ? undefined : invalid('fork', parsed.error);
      return { name: 'fork', ...parsed };
    }
    case 'watch':
      return parseWatch(rest);
    case 'chart':
      return parseChart(rest);
    case 'alert':
    case 'alerts':
    case 'mute':
    case 'unmute':
      return parseAlertCommand(verb, rest);
    default:
      return undefined;
  }
}

/** Words of a command line: whitespace-separated, with '…' and "…" quoting (no other shell syntax). */
export function splitCommandLine(text: string): string[] | undefined {
  const words: string[] = [];
  let current: string | undefined;
  let quote: '"' | "'" | undefined;
  for (const character of text.replace(/[“”]/g, '"').replace(/[‘’]/g, "'")) {
    if (quote !== undefined) {
      if (character === quote) quote = undefined;
      else current = (current ?? '') + character;
    } else if (character === '"' || character === "'") {
      quote = character;
      current ??= '';
    } else if (/\s/.test(character)) {
      if (current !== undefined) words.push(current);
      current = undefined;
    } else {
      current = (current ?? '') + character;
    }
  }
  if (quote !== undefined) return undefined;
  if (current !== undefined) words.push(current);
  return words;
}

/** `schedule <run> --cron "0 3 * * *"` (the cron quoted, five fields or a shortcut like `@daily`). */
function parseSchedule(afterVerb: string): PlainCommand | undefined {
  const words = splitCommandLine(afterVerb.trim());
  if (words === undefined) return invalid('schedule', 'unbalanced quote; write --cron "0 3 * * *"');
  const [run, flag, cron, ...extra] = words;
  if (run === undefined || !RUN_REFERENCE.test(run)) return undefined;
  if (flag !== '--cron' || cron === undefined || extra.length > 0) {
    return invalid(
      'schedule',
      'write `schedule <run> --cron "0 3 * * *"` (five cron fields, UTC, in quotes)',
    );
  }
  return { name: 'schedule', run, cron };
}

/** `resume <run> [--on BACKEND]`. */
function parseResume(tokens: string[]): PlainCommand | undefined {
  const [run, ...flags] = tokens;
  if (run === undefined || !RUN_REFERENCE.test(run)) return undefined;
  if (flags.length === 0) return { name: 'resume', run };
  const [key, inlineValue] = (flags[0] ?? '').split('=', 2);
  const value = inlineValue ?? flags[1];
  const used = inlineValue === undefined ? 2 : 1;
  if (key !== '--on' || value === undefined || flags.length !== used) return undefined;
  const command: Extract<PlainCommand, { name: 'resume' }> = { name: 'resume', run };
  const error = setPlacementFlag(command, key, value);
  return error === undefined ? command : invalid('resume', error);
}

function parseRun(afterVerb: string): PlainCommand | undefined {
  // Chat clients turn `--` into an em dash; both separate the options from the command.
  const separator = /(?:^|\s)(?:--|—)(?:\s|$)/.exec(afterVerb);
  if (separator !== null) {
    const argv = splitCommandLine(afterVerb.slice(separator.index + separator[0].length));
    if (argv === undefined) return invalid('run', 'unbalanced quote in the command');
    if (argv.length === 0) return invalid('run', 'nothing after `--`: give the command to run');
    // Quotes group a flag's value (`--eval "python eval.py"`).
    const flags = splitCommandLine(afterVerb.slice(0, separator.index));
    if (flags === undefined) return invalid('run', 'unbalanced quote in the options');
    const parsed = parseRunFlags(flags, {
      name: 'run',
      command: argv,
    });
    return parsed;
  }
  const words = splitCommandLine(afterVerb);
  if (words === undefined) return invalid('run', 'unbalanced quote in the options');
  const [path, ...flags] = words;
  // "run the eval again please" is a sentence, not a command: require something that looks like a script.
  if (path === undefined || !/\.(py|sh)$/.test(path)) return undefined;
  return parseRunFlags(flags, { name: 'run', path });
}

function parseRunFlags(
  flags: string[],
  command: Extract<PlainCommand, { name: 'run' }>,
): PlainCommand | undefined {
  for (let index = 0; index < flags.length; index += 1) {
    const flag = flags[index] ?? '';
    const [key, inlineValue] = flag.includes('=') ? flag.split('=', 2) : [flag, undefined];
    const value = inlineValue ?? flags[++index];
    if (value === undefined) return invalid('run', `${key} needs a value`);
    if (key === '--gpus') {
      if (!/^\d+$/.test(value)) return invalid('run', `--gpus must be a whole number, got "${value}"`);
      command.gpus = Number(value);
    } else if (key === '--name') {
      if (!RUN_REFERENCE.test(value))
        return invalid('run', `--name may use letters, digits, "-", "_" and "." only`);
      command.runName = value;
    } else if (key === '--hours' || key === '--max-hours') {
      const hours = Number(value);
      if (!Number.isFinite(hours) || hours <= 0) return invalid('run', `${key} must be a positive number`);
      command.maxHours = hours;
    } else if (key === '--env') {
      if (!/^[\w.-]{1,64}$/.test(value)) return invalid('run', '--env takes an environment name');
      command.env = value;
    } else if (key === '--cwd') {
      command.cwd = value;
    } else if (key === '--logdir') {
      command.logdir = value;
    } else if (key === '--eval') {
      if (value.trim() === '') return invalid('run', '--eval needs a command, e.g. --eval "python eval.py"');
      command.evalCommand = value;
    } else if (key === '--nodes') {
      if (!/^[1-9]\d{0,3}$/.test(value))
        return invalid('run', `--nodes must be a whole number ≥ 1, got "${value}"`);
      command.nodes = Number(value);
    } else if (key === '--on' || key === '--image' || key === '--flavor') {
      const error = setPlacementFlag(command, key, value);
      if (error !== undefined) return invalid('run', error);
    } else {
      return invalid(
        'run',
        `unknown option ${key}; use --gpus N, --name X, --hours H, --env E, --cwd DIR, --logdir DIR, --eval "CMD", --nodes N, --on BACKEND, --image I, --flavor F (then -- <command>)`,
      );
    }
  }
  return command;
}

/** `watch slurm:<jobid> [--name X]` or `watch <log file> [--pid N] [--name X]`. */
function parseWatch(tokens: string[]): PlainCommand | undefined {
  const [target, ...flags] = tokens;
  if (target === undefined) return undefined;
  if (/^(?:k8s|hf):/.test(target)) return parseRemoteWatch(target, flags);
  const slurm = /^slurm:(\d+(?:_\d+)?)$/.exec(target);
  // "watch the loss" is a sentence: a log target must look like a file path.
  if (slurm === null && !/^[\w./~-]*[./][\w./-]*$/.test(target)) return undefined;
  let runName: string | undefined;
  let pid: number | undefined;
  for (let index = 0; index < flags.length; index += 1) {
    const flag = flags[index] ?? '';
    const [key, inlineValue] = flag.includes('=') ? flag.split('=', 2) : [flag, undefined];
    const value = inlineValue ?? flags[++index];
    if (value === undefined) return invalid('watch', `${key} needs a value`);
    if (key === '--name') {
      if (!RUN_REFERENCE.test(value))
        return invalid('watch', `--name may use letters, digits, "-", "_" and "." only`);
      runName = value;
    } else if (key === '--pid' && slurm === null) {
      if (!/^[1-9]\d{0,9}$/.test(value))
        return invalid('watch', `--pid must be a process id, got "${value}"`);
      pid = Number(value);
    } else {
      return invalid(
        'watch',
        slurm === null
          ? `unknown option ${key}; use --pid N, --name X`
          : `unknown option ${key}; use --name X`,
      );
    }
  }
  const watchTarget: WatchTarget =
    slurm !== null
      ? { kind: 'slurm', jobId: slurm[1] as string }
      : { kind: 'log', path: target, ...definedOnly({ pid }) };
  return { name: 'watch', target: watchTarget, ...definedOnly({ runName }) };
}

/** `watch k8s:<namespace>/<job> [--name X]`, `watch hf:<job id> [--name X]`. */
function parseRemoteWatch(target: string, flags: string[]): PlainCommand {
  const watchTarget = remoteWatchTarget(target);
  if (watchTarget === undefined) {
    return invalid('watch', 'use `watch k8s:<namespace>/<job>` or `watch hf:<job id>`');
  }
  const [key, value, ...extra] = flags;
  if (key === undefined) return { name: 'watch', target: watchTarget };
  if (key !== '--name' || value === undefined || extra.length > 0 || !RUN_REFERENCE.test(value)) {
    return invalid('watch', 'the only option here is --name X (letters, digits, "-", "_" and ".")');
  }
  return { name: 'watch', target: watchTarget, runName: value };
}

function parseChart(tokens: string[]): PlainCommand | undefined {
  const [run, ...rest] = tokens;
  if (run === undefined || !RUN_REFERENCE.test(run)) return undefined;
  const metrics: string[] = [];
  let steps: { from: number; to: number } | undefined;
  for (let index = 0; index < rest.length; index += 1) {
    const token = rest[index] ?? '';
    if (token === '--steps' || token.startsWith('--steps=')) {
      const value = token.includes('=') ? token.slice('--steps='.length) : rest[++index];
      const match = value === undefined ? null : /^(\d+)?\.\.(\d+)?$/.exec(value);
      if (match === null) return invalid('chart', '--steps takes a range like 1000..2000');
      steps = {
        from: match[1] === undefined ? 0 : Number(match[1]),
        to: match[2] === undefined ? Number.MAX_SAFE_INTEGER : Number(match[2]),
      };
      if (steps.from > steps.to) return invalid('chart', '--steps range is backwards');
    } else if (/^[\w./-]{1,64}$/.test(token)) {
      metrics.push(token);
    } else {
      return undefined;
    }
  }
  return { name: 'chart', run, metrics, ...definedOnly({ steps }) };
}

/**
 * `alert <run> when <rule>`, `alert <run> remove <rule-id>`, `alerts <run>`,
 * `mute <run> <detector> [for <duration>]`, `unmute <run> <detector>`. Anything else (e.g. "alert me when
 * it finishes") is a sentence for the agent.
 */
function parseAlertCommand(verb: string, tokens: string[]): PlainCommand | undefined {
  const [run, ...rest] = tokens;
  if (run === undefined || !RUN_REFERENCE.test(run)) return undefined;
  if (verb === 'alerts') return rest.length === 0 ? { name: 'alerts', run } : undefined;
  if (verb === 'alert') {
    if (rest[0]?.toLowerCase() === 'remove' && rest.length === 2)
      return { name: 'alert-remove', run, ruleId: rest[1] as string };
    if (rest[0]?.toLowerCase() !== 'when') return undefined;
    const rule = rest.slice(1).join(' ');
    // "alert me when it finishes" is a sentence: a rule starts with a metric and a comparison.
    if (!/^[\w./-]+\s*(?:>=|<=|==|!=|>|<)/.test(rule)) return undefined;
    return { name: 'alert', run, rule };
  }
  const [detector, ...tail] = rest;
  if (detector === undefined || !/^[\w-]{1,32}$/.test(detector)) return undefined;
  if (verb === 'unmute') return tail.length === 0 ? { name: 'unmute', run, detector } : undefined;
  if (tail.length === 0) return { name: 'mute', run, detector };
  if (tail[0]?.toLowerCase() === 'for' && tail.length === 2)
    return { name: 'mute', run, detector, duration: tail[1] as string };
  return undefined;
}

function invalid(command: string, error: string): PlainCommand {
  return { name: 'invalid', command, error };
}
