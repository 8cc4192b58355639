import { execFile } from 'node:child_process';
import type { RunUser } from './run-as-user.js';

/**
 * How the pre-flight runs agent-written code with no network: `unshare --net` puts it in a new network
 * namespace whose only interface is a loopback that is down, so it reaches neither the bot's Redis nor
 * the internet. Whether that works depends on the host (root, or unprivileged user namespaces; some
 * containers forbid both), so it is tried once per user and the answer kept.
 */
export interface NetworkIsolation {
  /**
   * The argv prefix that starts a command as `runAs` (or as the bot when undefined) with no network, or
   * undefined where `unshare --net` does not work here. With a prefix for `runAs`, the prefix itself
   * switches user: spawn it as the bot.
   */
  prefix(runAs: RunUser | undefined): Promise<string[] | undefined>;
}

/** The candidates, best first: as root, unshare then drops to the run user; otherwise a user namespace. */
function candidates(runAs: RunUser | undefined, botUid: number | undefined): string[][] {
  if (botUid === 0) {
    const drop = runAs === undefined ? [] : [`--setgid=${runAs.gid}`, `--setuid=${runAs.uid}`];
    return [['unshare', '--net', ...drop, '--']];
  }
  // A non-root bot can only run code as itself: map its user to itself (or, on older util-linux, to 0
  // inside the namespace, which grants nothing outside it).
  return [
    ['unshare', '--net', '--map-current-user', '--'],
    ['unshare', '--net', '--map-root-user', '--'],
  ];
}

function works(prefix: string[]): Promise<boolean> {
  const [command, ...rest] = prefix;
  if (command === undefined) return Promise.resolve(false);
  return new Promise((resolve) => {
    execFile(command, [...rest, 'true'], { timeout: 5000 }, (error) => resolve(error === null));
  });
}

export function createNetworkIsolation(options: { botUid: number | undefined }): NetworkIsolation {
  const answers = new Map<string, Promise<string[] | undefined>>();
  return {
    prefix(runAs) {
      const key = runAs === undefined ? 'bot' : String(runAs.uid);
      let answer = answers.get(key);
      if (answer === undefined) {
        answer = (async () => {
          for (const prefix of candidates(runAs, options.botUid)) {
            if (await works(prefix)) return prefix;
          }
          return undefined;
        })();
        answers.set(key, answer);
      }
      return answer;
    },
  };
}
