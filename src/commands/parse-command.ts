/**
 * Plain commands: the actions that need no LLM and keep working when it is down. Parsing is strict so
 * that natural language ("stop the run if the loss explodes") goes to the agent, not to a command.
 */

export type PlainCommand =
  | { name: 'help' }
  | { name: 'runs' }
  | { name: 'status'; run?: string }
  | { name: 'pause' | 'resume' | 'stop'; run: string }
  | { name: 'run'; path: string; gpus?: number; runName?: string; maxHours?: number }
  | { name: 'chart'; run: string; metrics: string[]; steps?: { from: number; to: number } }
  | { name: 'alert'; run: string; rule: string }
  | { name: 'alert-remove'; run: string; ruleId: string }
  | { name: 'alerts'; run: string }
  | { name: 'mute'; run: string; detector: string; duration?: string }
  | { name: 'unmute'; run: string; detector: string }
  | { name: 'invalid'; command: string; error: string };

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
const RUN_REFERENCE = /^[\w.-]{1,100}$/;

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
      return rest.length === 1 && RUN_REFERENCE.test(rest[0] ?? '')
        ? { name: 'status', run: rest[0] as string }
        : undefined;
    case 'pause':
    case 'resume':
    case 'stop':
      return rest.length === 1 && RUN_REFERENCE.test(rest[0] ?? '')
        ? { name: verb, run: rest[0] as string }
        : undefined;
    case 'run':
      return parseRun(rest);
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

function parseRun(tokens: string[]): PlainCommand | undefined {
  const [path, ...flags] = tokens;
  // "run the eval again please" is a sentence, not a command: require something that looks like a script.
  if (path === undefined || !/\.py$/.test(path)) return undefined;
  const command: Extract<PlainCommand, { name: 'run' }> = { name: 'run', path };
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
    } else {
      return invalid('run', `unknown option ${key}; use --gpus N, --name X, --hours H`);
    }
  }
  return command;
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
  return { name: 'chart', run, metrics, ...(steps === undefined ? {} : { steps }) };
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
