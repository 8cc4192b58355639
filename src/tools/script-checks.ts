import { checkPythonSyntax } from '../monitor/triage.js';
import { describePreflight, runPreflight } from '../runs/preflight.js';

/**
 * "Check before spending": every script that is about to get an approval card is compiled first
 * (`py_compile`), and optionally run for a few steps on CPU. Run operations call these through the
 * hooks below, whoever asked (a person's `run`, the agent, a monitor fix).
 */

export interface ScriptChecks {
  /** Resolves a sentence with the line number when the script does not compile, else undefined. */
  checkSyntax(source: string): Promise<string | undefined>;
  /** The pre-flight line for the card, or undefined when pre-flights are off. */
  preflight?(source: string, config?: Record<string, unknown>): Promise<string>;
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
}): ScriptChecks {
  const checks: ScriptChecks = {
    async checkSyntax(source) {
      const result = await checkPythonSyntax(source, options.python, options.environment);
      return result.ok ? undefined : describeSyntaxError(result.error);
    },
  };
  if (options.preflightSteps > 0) {
    checks.preflight = async (source, config) =>
      describePreflight(
        await runPreflight(
          {
            python: options.python,
            environment: options.environment,
            steps: options.preflightSteps,
            timeoutS: options.preflightTimeoutS,
          },
          source,
          config,
        ),
      );
  }
  return checks;
}
