import { execFile } from 'node:child_process';
import { copyFile, lstat, mkdir, readFile, realpath, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { definedOnly } from '../../defined-only.js';
import { ToolPolicyError } from '../../errors.js';
import type { RunMeta } from '../records/run-types.js';

/**
 * `run … -- <command>`: checks a command against the workspace, finds the files it names (the `.py` a fix
 * would edit, the files copied for provenance), and records where it came from (git commit, dirty flag).
 */

const MAX_FILE_BYTES = 512 * 1024;
const MAX_NAMED_FILES = 20;

export interface PreparedCommand {
  argv: string[];
  /** Real absolute working directory, inside the workspace. */
  cwd: string;
  /** Real absolute paths of the workspace files the command names. */
  files: string[];
  /** The `.py` file a script edit or fix changes (first named `.py`, or the module of `python -m`). */
  scriptPath?: string;
  /** Its source (empty when there is none). */
  script: string;
  /** A run name when none is given. */
  suggestedName: string;
}

/** Shell-style display of an argv (for cards and status); quoting only where a word needs it. */
export function formatCommand(argv: readonly string[]): string {
  return argv
    .map((word) => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`))
    .join(' ');
}

function inside(root: string, target: string): boolean {
  return target === root || target.startsWith(root + path.sep);
}

/**
 * Resolves `--logdir` (relative to `--cwd`, else the workspace) to an absolute path inside the workspace,
 * symlinks resolved. It may not exist yet (the script makes it): its deepest existing part is resolved and
 * the rest appended. Outside the workspace, or a file, is refused.
 */
export async function resolveLogDirectory(workspace: string, logdir: string, cwd?: string): Promise<string> {
  const root = await realpath(workspace);
  const base = await resolveWorkingDirectory(workspace, cwd);
  let existing = path.resolve(base, logdir);
  const rest: string[] = [];
  let real: string | undefined;
  while (real === undefined) {
    real = await realpath(existing).catch(() => undefined);
    if (real !== undefined) break;
    const parent = path.dirname(existing);
    if (parent === existing) break;
    rest.unshift(path.basename(existing));
    existing = parent;
  }
  const resolved = path.join(real ?? existing, ...rest);
  if (real === undefined || !inside(root, resolved)) {
    throw new ToolPolicyError(
      'path_outside_workspace',
      `--logdir ${logdir} is outside the workspace (${root}); refused`,
    );
  }
  if (rest.length === 0 && !(await stat(real)).isDirectory())
    throw new ToolPolicyError('invalid_input', `--logdir ${logdir} is a file, not a directory`);
  return resolved;
}

/** Resolves `--cwd` (default: the workspace) to a real directory inside the workspace. */
async function resolveWorkingDirectory(workspace: string, cwd: string | undefined): Promise<string> {
  const root = await realpath(workspace);
  if (cwd === undefined) return root;
  const candidate = path.resolve(root, cwd);
  let real: string;
  try {
    real = await realpath(candidate);
  } catch {
    throw new ToolPolicyError('cwd_not_found', `no directory ${cwd} in the workspace`);
  }
  if (!inside(root, real)) {
    throw new ToolPolicyError('path_outside_workspace', `${cwd} is outside the workspace (${root}); refused`);
  }
  if (!(await stat(real)).isDirectory())
    throw new ToolPolicyError('cwd_not_found', `${cwd} is not a directory`);
  return real;
}

async function workspaceFile(root: string, cwd: string, word: string): Promise<string | undefined> {
  if (word === '' || word.startsWith('-') || word.length > 500) return undefined;
  const candidate = path.resolve(cwd, word);
  try {
    const real = await realpath(candidate);
    if (!inside(root, real)) return undefined;
    const stats = await lstat(real);
    return stats.isFile() && stats.size <= MAX_FILE_BYTES ? real : undefined;
  } catch {
    return undefined;
  }
}

/** `python -m pkg.train` → `pkg/train.py` or `pkg/train/__main__.py` under the working directory. */
async function moduleFile(root: string, cwd: string, argv: readonly string[]): Promise<string | undefined> {
  const index = argv.indexOf('-m');
  const module = index === -1 ? undefined : argv[index + 1];
  if (module === undefined || !/^[\w.]+$/.test(module)) return undefined;
  const base = module.replaceAll('.', '/');
  return (
    (await workspaceFile(root, cwd, `${base}.py`)) ?? (await workspaceFile(root, cwd, `${base}/__main__.py`))
  );
}

export async function prepareCommand(
  workspace: string,
  argv: readonly string[],
  cwdOption: string | undefined,
): Promise<PreparedCommand> {
  if (argv.length === 0)
    throw new ToolPolicyError('invalid_command', 'nothing after `--`: give the command to run');
  const root = await realpath(workspace);
  const cwd = await resolveWorkingDirectory(workspace, cwdOption);
  const files: string[] = [];
  for (const word of argv) {
    // `--config=conf.yaml` names a file too.
    const value = word.startsWith('--') && word.includes('=') ? word.slice(word.indexOf('=') + 1) : word;
    const file = await workspaceFile(root, cwd, value);
    if (file !== undefined && !files.includes(file)) files.push(file);
    if (files.length >= MAX_NAMED_FILES) break;
  }
  const module = await moduleFile(root, cwd, argv);
  if (module !== undefined && !files.includes(module)) files.push(module);
  const scriptPath = module ?? files.find((file) => file.endsWith('.py'));
  const script = scriptPath === undefined ? '' : await readFile(scriptPath, 'utf8');
  const named = scriptPath ?? files[0];
  const suggestedName =
    named === undefined
      ? path.basename(argv[0] ?? 'command')
      : path
          .basename(named)
          .replace(/\.(py|sh)$/, '')
          .replace(/_/g, '-');
  return {
    argv: [...argv],
    cwd,
    files,
    ...definedOnly({ scriptPath }),
    script,
    suggestedName,
  };
}

/** Processes per node the launcher will start, read from the usual flags (undefined when not given). */
export function processesPerNode(argv: readonly string[]): { flag: string; value: number } | undefined {
  const flags = [
    '--nproc_per_node',
    '--nproc-per-node',
    '--num_processes',
    '--num-processes',
    '--num_gpus',
    '--num-gpus',
  ];
  for (let index = 0; index < argv.length; index += 1) {
    const word = argv[index] ?? '';
    for (const flag of flags) {
      let value: string | undefined;
      if (word === flag) value = argv[index + 1];
      else if (word.startsWith(`${flag}=`)) value = word.slice(flag.length + 1);
      if (value !== undefined && /^\d+$/.test(value)) return { flag, value: Number(value) };
    }
  }
  return undefined;
}

/** Card warnings for a command: a launcher starting more (or fewer) processes than GPUs asked for. */
export function commandWarnings(meta: Pick<RunMeta, 'command' | 'gpus'>): string[] {
  if (meta.command === undefined) return [];
  const perNode = processesPerNode(meta.command);
  if (perNode === undefined || meta.gpus === 0 || perNode.value === meta.gpus) return [];
  return [
    `${perNode.flag} ${perNode.value} does not match the ${meta.gpus} GPU${meta.gpus === 1 ? '' : 's'} asked for: ${perNode.value > meta.gpus ? 'some ranks would share a GPU or fail' : 'some GPUs would sit idle'}`,
  ];
}

function git(cwd: string, args: string[]): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile('git', ['-C', cwd, ...args], { timeout: 10_000, encoding: 'utf8' }, (error, stdout) => {
      resolve(error === null ? stdout : undefined);
    });
  });
}

interface Provenance {
  command: string[];
  cwd: string;
  environment?: string;
  git?: { commit: string; dirty: boolean };
  files: Array<{ path: string; copiedAs: string }>;
  recordedAt: string;
}

/** Writes `provenance.json` and copies the named files into `<runDir>/provenance/` (paths kept relative to the workspace). */
export async function recordProvenance(
  runDir: string,
  workspace: string,
  prepared: PreparedCommand,
  environment: string | undefined,
  now: Date,
): Promise<Provenance> {
  const root = await realpath(workspace);
  const commit = (await git(prepared.cwd, ['rev-parse', 'HEAD']))?.trim();
  const status = commit === undefined ? undefined : await git(prepared.cwd, ['status', '--porcelain']);
  const files: Provenance['files'] = [];
  for (const file of prepared.files) {
    const relative = path.relative(root, file);
    const copiedAs = path.join('provenance', relative);
    await mkdir(path.dirname(path.join(runDir, copiedAs)), { recursive: true });
    await copyFile(file, path.join(runDir, copiedAs));
    files.push({ path: relative, copiedAs });
  }
  const provenance: Provenance = {
    command: prepared.argv,
    cwd: prepared.cwd,
    ...definedOnly({ environment }),
    ...(commit === undefined || commit === ''
      ? {}
      : { git: { commit, dirty: (status ?? '').trim() !== '' } }),
    files,
    recordedAt: now.toISOString(),
  };
  await writeFile(path.join(runDir, 'provenance.json'), `${JSON.stringify(provenance, null, 2)}\n`, 'utf8');
  return provenance;
}
