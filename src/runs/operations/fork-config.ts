import { RunError } from '../../errors.js';
import type { RunMeta } from '../records/run-types.js';

/**
 * The pure side of `fork <run> --set key=value`: where each setting lands and the lines the approval card
 * shows. A key the parent passes as `--key` (in its command or its arguments) has that value replaced; other
 * keys go into the config a script run reads (`shepherd.config()`), or are appended as `--key value` to a
 * command (a command has no other way to receive them).
 */

interface ForkSetting {
  key: string;
  value: string;
}

const KEY = /^[A-Za-z_][\w.-]{0,63}$/;

/** `fork <run> [--from-step N] [--set key=value …] [--name X] [--gpus N]` as parsed. */
export interface ForkRequest {
  fromStep?: number;
  settings: ForkSetting[];
  runName?: string;
  gpus?: number;
}

/** `key=value` → a setting, or a sentence saying what is wrong with it. */
export function parseSetting(text: string): ForkSetting | string {
  const at = text.indexOf('=');
  if (at <= 0) return `--set takes key=value, got "${text}"`;
  const key = text.slice(0, at);
  const value = text.slice(at + 1);
  if (!KEY.test(key))
    return `--set key "${key}" may use letters, digits, "_", "-" and "." (starting with a letter)`;
  if (value === '') return `--set ${key}= needs a value`;
  return { key, value };
}

/** A config value typed as the text reads: numbers and true/false as such, everything else a string. */
function typedValue(value: string): unknown {
  if (/^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/.test(value)) return Number(value);
  if (value === 'true' || value === 'false') return value === 'true';
  return value;
}

const shown = (value: unknown) =>
  value === undefined ? '(unset)' : typeof value === 'string' ? value : JSON.stringify(value);

/** Replaces `--key v` or `--key=v` in an argv; undefined when the argv does not pass the key. */
function replaceFlag(
  argv: readonly string[],
  key: string,
  value: string,
): { argv: string[]; old: string } | undefined {
  const flag = `--${key}`;
  for (let index = 0; index < argv.length; index += 1) {
    const word = argv[index] ?? '';
    if (word.startsWith(`${flag}=`)) {
      const next = [...argv];
      next[index] = `${flag}=${value}`;
      return { argv: next, old: word.slice(flag.length + 1) };
    }
    if (word === flag && index + 1 < argv.length) {
      const next = [...argv];
      const old = next[index + 1] ?? '';
      next[index + 1] = value;
      return { argv: next, old };
    }
  }
  return undefined;
}

interface ForkConfiguration {
  config?: Record<string, unknown>;
  args?: string[];
  command?: string[];
  /** `key: old → new`, in the order given. */
  changes: string[];
}

/** The fork's config, arguments and command after its settings, and the card's lines about them. */
export function applySettings(
  parent: Pick<RunMeta, 'config' | 'args' | 'command'>,
  settings: readonly ForkSetting[],
): ForkConfiguration {
  let config = parent.config === undefined ? undefined : { ...parent.config };
  let args = parent.args === undefined ? undefined : [...parent.args];
  let command = parent.command === undefined ? undefined : [...parent.command];
  const changes: string[] = [];
  const seen = new Set<string>();
  for (const { key, value } of settings) {
    if (seen.has(key)) throw new RunError('invalid_run', `--set ${key} is given twice`);
    seen.add(key);
    const inCommand = command === undefined ? undefined : replaceFlag(command, key, value);
    const inArgs = inCommand === undefined && args !== undefined ? replaceFlag(args, key, value) : undefined;
    if (inCommand !== undefined) {
      command = inCommand.argv;
      changes.push(`--${key}: ${inCommand.old} → ${value}`);
    } else if (inArgs !== undefined) {
      args = inArgs.argv;
      changes.push(`--${key}: ${inArgs.old} → ${value}`);
    } else if (command !== undefined) {
      command = [...command, `--${key}`, value];
      changes.push(`--${key}: (unset) → ${value}`);
    } else {
      const old = config?.[key];
      config = { ...config, [key]: typedValue(value) };
      changes.push(`${key}: ${shown(old)} → ${shown(config[key])}`);
    }
  }
  return {
    changes,
    ...(config === undefined ? {} : { config }),
    ...(args === undefined ? {} : { args }),
    ...(command === undefined ? {} : { command }),
  };
}
