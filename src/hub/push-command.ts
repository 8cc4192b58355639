import { stripLeadingMention } from '../commands/parse-command.js';

/** `push <run> [--repo ns/name] [--public]`: what to push where; an error sentence for a malformed one. */
type PushCommand =
  | { kind: 'push'; run: string; repo?: string; public: boolean }
  | { kind: 'invalid'; error: string };

const RUN_REFERENCE = /^[\w.-]{1,100}$/;
const USAGE = 'usage: `push <run> [--repo namespace/name] [--public]`';

/** undefined when the text is not a push command (it goes to the agent). */
export function parsePushCommand(text: string, botName: string): PushCommand | undefined {
  const tokens = stripLeadingMention(text, botName)
    .replace(/^\//, '')
    .split(/\s+/)
    .filter((token) => token !== '');
  const [verb, run, ...flags] = tokens;
  if (verb?.toLowerCase() !== 'push') return undefined;
  // "push the model when it is done" is a sentence: a command names a run and flags only.
  if (run === undefined || !RUN_REFERENCE.test(run)) return undefined;
  const command: Extract<PushCommand, { kind: 'push' }> = { kind: 'push', run, public: false };
  for (let index = 0; index < flags.length; index += 1) {
    const flag = flags[index];
    if (flag === '--public') command.public = true;
    else if (flag === '--private') command.public = false;
    else if (flag === '--repo') {
      const repo = flags[++index];
      if (repo === undefined) return { kind: 'invalid', error: `--repo needs namespace/name; ${USAGE}` };
      command.repo = repo;
    } else if (flag?.startsWith('--repo=')) command.repo = flag.slice('--repo='.length);
    else if (flag?.startsWith('--')) return { kind: 'invalid', error: `unknown option ${flag}; ${USAGE}` };
    else return undefined;
  }
  return command;
}
