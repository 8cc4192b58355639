import { definedOnly } from '../../defined-only.js';
import { ToolPolicyError } from '../../errors.js';
import { commandWarnings, formatCommand } from '../launch/command-launch.js';
import { trackerWarnings } from '../launch/tracker-credentials.js';
import { describeEnvironment } from '../named-environments.js';
import type { RunMeta } from '../records/run-types.js';
import type { RunOperationsOptions } from './operation-types.js';

/** The checks every launch, resume and script change passes before a card: compiles, pre-flight, card lines. */
export interface LaunchChecks {
  assertCompiles(
    script: string,
    threadId: string,
    origin: 'agent' | 'command' | 'monitor',
    what: string,
  ): Promise<void>;
  runPreflight(
    threadId: string,
    name: string,
    script: string,
    config: Record<string, unknown> | undefined,
  ): Promise<string | undefined>;
  launchDetails(
    meta: RunMeta,
    script: string,
  ): { command?: string; environment?: string; warnings?: string[] };
}

export function createLaunchChecks(options: RunOperationsOptions): LaunchChecks {
  const environments = options.environments ?? {};
  return {
    /**
     * No card for a script that does not compile: the error (with its line) goes to whoever asked — the
     * command's answer, the agent's tool result — and, for the agent, into the thread as well.
     */
    async assertCompiles(script, threadId, origin, what) {
      // Command runs without a Python file (`run -- bash train.sh`) have no source to compile.
      if (script.trim() === '') return;
      const syntaxError = await options.checkSyntax?.(script);
      if (syntaxError === undefined) return;
      const message = `${what}: ${syntaxError}\nNo approval card was posted.`;
      if (origin === 'agent') {
        await options.notify?.(threadId, `⚠️ ${message}`).catch(() => undefined);
      }
      throw new ToolPolicyError('script_syntax_error', message);
    },

    /** The pre-flight takes up to its timeout: the thread hears that it is running. */
    async runPreflight(threadId, name, script, config) {
      if (options.preflight === undefined) return undefined;
      return options.preflight(script, config, async () => {
        await options
          .notify?.(threadId, `Running a short CPU pre-flight of ${name} before the approval card…`)
          .catch(() => undefined);
      });
    },

    /** Card lines for how a run starts: the exact command, the environment, warnings. */
    launchDetails(meta, script) {
      const spec = meta.environmentName === undefined ? undefined : environments[meta.environmentName];
      const training = meta.command === undefined ? undefined : formatCommand(meta.command);
      // The approver sees the evaluation too: it runs on the same GPUs, after training exits 0.
      const command =
        meta.evalCommand === undefined
          ? training
          : `${training ?? 'python -u train.py'}\n# then, after exit 0, in the run directory:\n${meta.evalCommand}`;
      const reaching = { ...options.runEnvironment, ...spec?.env };
      return {
        ...definedOnly({ command }),
        ...(meta.environmentName === undefined
          ? {}
          : {
              environment:
                spec === undefined ? meta.environmentName : describeEnvironment(meta.environmentName, spec),
            }),
        warnings: [...commandWarnings(meta), ...trackerWarnings(script, reaching)],
      };
    },
  };
}
