import { setPlacementFlag } from '../config/backend-kinds.js';
/**
 * The sweep grid and the `sweep` command line: `--grid key=v1,v2` lists become their cross product, each
 * trial a `{ key: value }` record handed to train.py as `--key value` and in `shepherd.config()`.
 */

export type GridValue = number | string;
type Grid = Array<{ key: string; values: GridValue[] }>;

/** Largest grid accepted from chat: a typo like `--grid lr=1,2,…` should not queue a thousand runs. */
export const MAX_TRIALS = 64;

export interface SweepSpec {
  /** A workspace `.py` script, or… */
  script?: string;
  /** …a command (`sweep [options] -- torchrun … train.py`): each trial appends its `--key value` pairs. */
  command?: string[];
  grid: Grid;
  gpus?: number;
  maxHours?: number;
  name?: string;
  metric?: string;
  mode?: 'min' | 'max';
  canarySteps?: number;
  parallel?: number;
  /** `--on`, `--image`, `--flavor`: where every trial runs. */
  on?: string;
  image?: string;
  flavor?: string;
  /** `--eval "<command>"`: every trial is evaluated after its training exits 0. */
  evalCommand?: string;
}

type ParsedSweep = { ok: true; spec: SweepSpec } | { ok: false; error: string };

const KEY = /^[A-Za-z_][\w-]{0,40}$/;
const NAME = /^[\w.-]{1,60}$/;

function parseValue(text: string): GridValue {
  const number = Number(text);
  return text.trim() !== '' && Number.isFinite(number) ? number : text;
}

/** `lr=1e-4,3e-4` → `{ key: 'lr', values: [0.0001, 0.0003] }`. */
export function parseGridEntry(text: string): { key: string; values: GridValue[] } | string {
  const equals = text.indexOf('=');
  if (equals <= 0) return `--grid takes key=v1,v2 (got "${text}")`;
  const key = text.slice(0, equals);
  if (!KEY.test(key)) return `--grid key "${key}" must be letters, digits, "_" or "-"`;
  const values = text
    .slice(equals + 1)
    .split(',')
    .map((value) => value.trim())
    .filter((value) => value !== '');
  if (values.length === 0) return `--grid ${key} needs at least one value`;
  if (values.some((value) => !/^[\w.+-]{1,40}$/.test(value)))
    return `--grid ${key}: values may use letters, digits, ".", "+", "-" and "_" only`;
  return { key, values: values.map(parseValue) };
}

/** The cross product, in the order the lists were given (the first key varies slowest). */
export function expandGrid(grid: Grid): Array<Record<string, GridValue>> {
  let trials: Array<Record<string, GridValue>> = [{}];
  for (const { key, values } of grid) {
    trials = trials.flatMap((trial) => values.map((value) => ({ ...trial, [key]: value })));
  }
  return trials;
}

export function trialArgs(values: Record<string, GridValue>): string[] {
  return Object.entries(values).flatMap(([key, value]) => [`--${key}`, String(value)]);
}

export function describeValues(values: Record<string, GridValue>): string {
  return Object.entries(values)
    .map(([key, value]) => `${key}=${value}`)
    .join(' ');
}

function positiveInteger(flag: string, value: string, allowZero = false): number | string {
  if (!/^\d+$/.test(value) || (!allowZero && Number(value) === 0))
    return `${flag} must be a whole number${allowZero ? '' : ' above 0'}, got "${value}"`;
  return Number(value);
}

/** Applies one `--key value` option to the spec; returns the error text when the option is wrong. */
function applySweepOption(spec: SweepSpec, key: string, value: string): string | undefined {
  let parsed: number | string;
  switch (key) {
    case '--grid': {
      const entry = parseGridEntry(value);
      if (typeof entry === 'string') return entry;
      if (spec.grid.some((existing) => existing.key === entry.key))
        return `--grid ${entry.key} is given twice`;
      spec.grid.push(entry);
      return undefined;
    }
    case '--gpus':
      parsed = positiveInteger(key, value, true);
      if (typeof parsed === 'string') return parsed;
      spec.gpus = parsed;
      return undefined;
    case '--hours':
    case '--max-hours': {
      const hours = Number(value);
      if (!Number.isFinite(hours) || hours <= 0) return `${key} must be a positive number`;
      spec.maxHours = hours;
      return undefined;
    }
    case '--name':
      if (!NAME.test(value)) return '--name may use letters, digits, "-", "_" and "." only';
      spec.name = value;
      return undefined;
    case '--metric':
      if (!/^[\w./-]{1,64}$/.test(value)) return `--metric "${value}" is not a metric name`;
      spec.metric = value;
      return undefined;
    case '--mode':
      if (value !== 'min' && value !== 'max') return '--mode is min or max';
      spec.mode = value;
      return undefined;
    case '--canary-steps':
      parsed = positiveInteger(key, value);
      if (typeof parsed === 'string') return parsed;
      spec.canarySteps = parsed;
      return undefined;
    case '--parallel':
      parsed = positiveInteger(key, value);
      if (typeof parsed === 'string') return parsed;
      spec.parallel = parsed;
      return undefined;
    case '--on':
    case '--image':
    case '--flavor':
      return setPlacementFlag(spec, key, value);
    case '--eval':
      if (value.trim() === '') return '--eval needs a command, e.g. --eval "python eval.py"';
      spec.evalCommand = value;
      return undefined;
    default:
      return `unknown option ${key}; use --grid k=v1,v2, --gpus N, --hours H, --name X, --metric M, --mode min|max, --canary-steps K, --parallel P, --on BACKEND, --image I, --flavor F, --eval "CMD"`;
  }
}

/**
 * Parses the tokens after `sweep`: `<script.py> [options]`, or `[options] -- <command…>` (the command is
 * given already split, as `command`). Undefined when it does not look like a sweep command at all.
 */
export function parseSweepTokens(tokens: string[], command?: string[]): ParsedSweep | undefined {
  let spec: SweepSpec;
  let flags: string[];
  if (command !== undefined) {
    if (command.length === 0) return { ok: false, error: 'nothing after `--`: give the command to run' };
    spec = { command, grid: [] };
    flags = tokens;
  } else {
    const [script, ...rest] = tokens;
    if (script === undefined || !/\.py$/.test(script)) return undefined;
    spec = { script, grid: [] };
    flags = rest;
  }
  for (let index = 0; index < flags.length; index += 1) {
    const flag = flags[index] ?? '';
    const [key, inline] =
      flag.includes('=') && flag.startsWith('--') && !flag.startsWith('--grid=')
        ? (flag.split('=', 2) as [string, string])
        : flag.startsWith('--grid=')
          ? ['--grid', flag.slice('--grid='.length)]
          : [flag, undefined];
    const value = inline ?? flags[++index];
    if (value === undefined) return { ok: false, error: `${key} needs a value` };
    const error = applySweepOption(spec, key, value);
    if (error !== undefined) return { ok: false, error };
  }
  if (spec.grid.length === 0)
    return {
      ok: false,
      error: `give at least one --grid key=v1,v2${command === undefined ? '' : ' (the sweep options go before `--`)'}`,
    };
  return { ok: true, spec };
}
