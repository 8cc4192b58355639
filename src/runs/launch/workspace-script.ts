import { lstat, realpath } from 'node:fs/promises';
import { isAbsolute, resolve, sep } from 'node:path';
import { ToolPolicyError } from '../../errors.js';

const MAX_SCRIPT_BYTES = 512 * 1024;

/** Refuses a script over `MAX_SCRIPT_BYTES` before any run, card or pre-flight exists. */
export function assertScriptSize(script: string): void {
  if (Buffer.byteLength(script) > MAX_SCRIPT_BYTES) {
    throw new ToolPolicyError('script_too_large', 'the script is larger than 512 KiB');
  }
}

/** Resolves a script path inside the workspace; `..`, outside absolute paths and symlinks out are refused. */
export async function resolveWorkspaceScript(workspace: string, path: string): Promise<string> {
  const root = await realpath(workspace);
  const candidate = isAbsolute(path) ? resolve(path) : resolve(root, path);
  const inside = (target: string) => target === root || target.startsWith(root + sep);
  if (!inside(candidate)) {
    throw new ToolPolicyError(
      'path_outside_workspace',
      `${path} is outside the workspace; scripts must live under ${root}`,
    );
  }
  let real: string;
  try {
    real = await realpath(candidate);
  } catch {
    throw new ToolPolicyError('script_not_found', `no script at ${path} in the workspace`);
  }
  if (!inside(real)) {
    throw new ToolPolicyError(
      'path_outside_workspace',
      `${path} points outside the workspace (symlink); refused`,
    );
  }
  const stats = await lstat(real);
  if (!stats.isFile()) throw new ToolPolicyError('script_not_found', `${path} is not a file`);
  if (stats.size > MAX_SCRIPT_BYTES)
    throw new ToolPolicyError('script_too_large', `${path} is larger than 512 KiB`);
  return real;
}
