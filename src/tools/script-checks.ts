import { checkPythonSyntax } from '../monitor/alerts/triage.js';
import { describePreflight, PREFLIGHT_REFUSED, runPreflight } from '../runs/launch/preflight.js';
import type { NetworkIsolation } from '../runs/network-isolation.js';
import type { RunUser } from '../runs/run-as-user.js';

/**
 * "Check before spending": every script that is about to get an approval card is compiled first
 * (`py_compile`), and optionally run for a few steps on CPU. Run operations call these through the
 * hooks below, whoever asked (a person's `run`, the agent, a monitor fix).
 */

export interface ScriptChecks {
  /** Resolves a sentence with the line number when the script does not compile, else undefined. */
  checkSyntax(source: string): Promise<string | undefined>;
  /**
   * The pre-flight line for the card, or undefined when pre-flights are off. `onStart` is called when
   * the script really starts (not when the pre-flight is refused).
   */
  preflight?(
    source: string,
    config?: Record<string, unknown>,
    onStart?: () => Promise<void>,
  ): Promise<string>;
}

/**
 * py_compile prints either `File "train.py", line 4 … SyntaxError: …` or, for some errors,
 * `Sorry: IndentationError: … (train.py, line 2)`. This keeps the line and the message.
 */
function describeSyntaxError(output: string): string {
  const lines = output.trim().split('\n');
  const fileLine = /File "[^"]*", line (\d+)/.exec(output)?.[1];
  const sorryLine = /\([^()]*, line (\d+)\)\s*$/m.exec(output)?.[1];
  const lineNumber = fileLine ?? sorryLine;
  const message = (lines.at(-1) ?? output).replace(/^Sorry: /, '').trim();
  const where = lineNumber === undefined ? '' : ` (line ${lineNumber})`;
  return `train.py does not compile${where}: ${message}\n\`\`\`\n${output.trim().slice(-1200)}\n\`\`\``;
}

export function createScriptChecks(options: {
  python: string;
  environment: Readonly<Record<string, string | undefined>>;
  preflightSteps: number;
  preflightTimeoutS: number;
  /** `SHEPHERD_RUN_AS_USER`: pre-flights run as this user. */
  runAs?: RunUser | undefined;
  /** The bot's own uid: as root with no run user, pre-flights are refused. */
  botUid: number | undefined;
  isolation: NetworkIsolation;
}): ScriptChecks {
  const checks: ScriptChecks = {
    async checkSyntax(source) {
      const result = await checkPythonSyntax(source, options.python, options.environment);
      return result.ok ? undefined : describeSyntaxError(result.error);
    },
  };
  if (options.preflightSteps === 0) return checks;
  // Agent-written code never runs as root before anyone has read it.
  if (options.botUid === 0 && options.runAs === undefined) {
    checks.preflight = async () => PREFLIGHT_REFUSED;
    return checks;
  }
  checks.preflight = async (source, config, onStart) => {
    const isolation = await options.isolation.prefix(options.runAs);
    await onStart?.();
    const result = await runPreflight(
      {
        python: options.python,
        environment: options.environment,
        steps: options.preflightSteps,
        timeoutS: options.preflightTimeoutS,
        runAs: options.runAs,
        isolation,
      },
      source,
      config,
    );
    return describePreflight(result);
  };
  return checks;
}
