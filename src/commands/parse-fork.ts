import type { ForkRequest } from '../runs/operations/fork-config.js';
import { parseSetting } from '../runs/operations/fork-config.js';

/** `fork <run> [--from-step N] [--set key=value …] [--name X] [--gpus N]`, or a sentence saying what is wrong. */
export function parseFork(
  tokens: readonly string[],
  runReference: RegExp,
): { run: string; request: ForkRequest } | { error: string } | undefined {
  const [run, ...flags] = tokens;
  // "fork it from the good step" is a sentence for the agent.
  if (run === undefined || !runReference.test(run) || (flags.length > 0 && !flags[0]?.startsWith('--')))
    return undefined;
  const request: ForkRequest = { settings: [] };
  for (let index = 0; index < flags.length; index += 1) {
    const flag = flags[index] ?? '';
    const split =
      flag.startsWith('--') && flag.includes('=') && !flag.startsWith('--set=') ? flag.indexOf('=') : -1;
    const key = split === -1 ? (flag.startsWith('--set=') ? '--set' : flag) : flag.slice(0, split);
    const inline =
      split === -1
        ? flag.startsWith('--set=')
          ? flag.slice('--set='.length)
          : undefined
        : flag.slice(split + 1);
    const value = inline ?? flags[++index];
    if (value === undefined) return { error: `${key} needs a value` };
    if (key === '--from-step') {
      if (!/^\d+$/.test(value)) return { error: `--from-step takes a step number, got "${value}"` };
      request.fromStep = Number(value);
    } else if (key === '--set') {
      const setting = parseSetting(value);
      if (typeof setting === 'string') return { error: setting };
      request.settings.push(setting);
    } else if (key === '--name') {
      if (!runReference.test(value))
        return { error: '--name may use letters, digits, "-", "_" and "." only' };
      request.runName = value;
    } else if (key === '--gpus') {
      if (!/^\d+$/.test(value)) return { error: `--gpus must be a whole number, got "${value}"` };
      request.gpus = Number(value);
    } else {
      return { error: `unknown option ${key}; use --from-step N, --set key=value, --name X, --gpus N` };
    }
  }
  return { run, request };
}
