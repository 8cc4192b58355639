import { execFile } from 'node:child_process';
import { definedOnly } from '../../defined-only.js';
import { RunError } from '../../errors.js';

/** What a Slurm CLI call returned. A non-zero exit is a result, not an exception: callers read stderr. */
export interface CommandResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

interface RunCommandOptions {
  timeoutMs?: number;
  cwd?: string;
}

/**
 * Runs one CLI command without a shell. Injected into the Slurm executor so tests and the benchmark can
 * count calls; rejects only when the command could not run at all (not installed, timed out).
 */
export type RunCommand = (
  file: string,
  args: readonly string[],
  options?: RunCommandOptions,
) => Promise<CommandResult>;

const DEFAULT_TIMEOUT_MS = 30_000;

/** `execFile`-based `RunCommand`. `environment` replaces the inherited one (e.g. to set `SLURM_CONF`). */
export function createRunCommand(environment?: Readonly<Record<string, string | undefined>>): RunCommand {
  return (file, args, options = {}) =>
    new Promise<CommandResult>((resolve, reject) => {
      execFile(
        file,
        [...args],
        {
          timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
          maxBuffer: 16 * 1024 * 1024,
          encoding: 'utf8',
          ...definedOnly({ cwd: options.cwd, env: environment }),
        },
        (error, stdout, stderr) => {
          if (error === null) {
            resolve({ stdout, stderr, exitCode: 0 });
            return;
          }
          // `code` is the exit status for a finished command, an errno string when it never ran.
          const code: unknown = (error as NodeJS.ErrnoException & { code?: unknown }).code;
          if (typeof code === 'number') {
            resolve({ stdout, stderr, exitCode: code });
            return;
          }
          const why = error.killed
            ? `timed out after ${options.timeoutMs ?? DEFAULT_TIMEOUT_MS} ms`
            : code === 'ENOENT'
              ? 'not found (is the Slurm client installed and on PATH?)'
              : error.message;
          reject(new RunError('slurm_unavailable', `${file} ${why}`, { cause: error }));
        },
      );
    });
}
