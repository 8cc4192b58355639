import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { BACKEND_LABELS } from '../../config/backend-kinds.js';
import type { Environments } from '../../config/environments.js';
import { definedOnly } from '../../defined-only.js';
import { errorMessage } from '../../errors.js';
import type { Logger } from '../../logger.js';
import {
  engineOf,
  type LocalContainerSettings,
  launchEnvironment,
  localLaunchPlan,
} from '../local-launch-plan.js';
import { PYTHON_RUNTIME_DIR, RUN_FILES } from '../records/run-files.js';
import type { RunMeta } from '../records/run-types.js';
import {
  type LaunchHubRevision,
  type LaunchRecord,
  MAX_DIFF_CHARS,
  parseLaunchEnvironment,
  writeLaunchRecord,
} from './launch-record.js';

/**
 * Captures a launch's reproducibility record beside the start: the launcher calls `beforeSpawn(meta)`,
 * which reads the git state of the run's tree before the process can write into it (waiting at most
 * `GIT_BEFORE_SPAWN_MS`), then `capture(meta)` once the run is running, without waiting. The command,
 * arguments, seed and git state are written first; the environment probe (`shepherd_env_probe.py` with the run's own interpreter and
 * variables, so `pip freeze` lists the run's packages) fills in the rest within `timeoutMs`. Nothing here
 * can fail a launch: every failure ends as a note in the record and a log line.
 */

const PROBE_FILE = 'shepherd_env_probe.py';
/** How long a launch waits for `git status` of its tree (a huge repository must not hold the start). */
const GIT_BEFORE_SPAWN_MS = 250;
const PYTHON_WORD = /^python(?:3(?:\.\d+)?)?$/;

interface LaunchCaptureOptions {
  runDir: (runId: string) => string;
  /** `SHEPHERD_PYTHON`. */
  python: string;
  environments: Environments;
  /** What local runs inherit (the caller passes `process.env`). */
  inherited: Readonly<Record<string, string | undefined>>;
  container?: LocalContainerSettings | undefined;
  /** Bound on the whole probe (pip freeze, torch import, nvidia-smi); a probe past it is killed. */
  timeoutMs: number;
  /** Hub revisions resolved in the run's thread whose repo the given launch text names. */
  hubRevisions?: (threadId: string, launchText: string) => Promise<LaunchHubRevision[]>;
  logger: Logger;
  now?: () => Date;
}

interface CommandResult {
  ok: boolean;
  stdout: string;
  error?: string;
}

function runCommand(
  argv: readonly string[],
  options: { cwd: string; env?: Record<string, string>; timeoutMs: number; signal: AbortSignal },
): Promise<CommandResult> {
  const [command = '', ...rest] = argv;
  return new Promise((resolve) => {
    const child = execFile(
      command,
      rest,
      {
        cwd: options.cwd,
        timeout: options.timeoutMs,
        killSignal: 'SIGKILL',
        encoding: 'utf8',
        maxBuffer: 16 * 1024 * 1024,
        signal: options.signal,
        ...definedOnly({ env: options.env }),
      },
      (error, stdout, stderr) => {
        const result: CommandResult =
          error === null
            ? { ok: true, stdout }
            : {
                ok: false,
                stdout,
                error: error.killed
                  ? `timed out after ${options.timeoutMs} ms`
                  : (stderr.trim() || error.message).slice(0, 300),
              };
        // An abort answers before the killed child is gone: wait for its exit, so "closed" means ended.
        const running = child.pid !== undefined && child.exitCode === null && child.signalCode === null;
        if (running) child.once('exit', () => resolve(result));
        else resolve(result);
      },
    );
  });
}

/** The seed a launch was given: `--seed N`, `--seed=N`, `seed=N` in its argv, or `seed` in its config. */
function seedOf(meta: Pick<RunMeta, 'command' | 'args' | 'config'>): string | undefined {
  const words = [...(meta.command ?? []), ...(meta.args ?? [])];
  for (let index = 0; index < words.length; index += 1) {
    const word = words[index] ?? '';
    if (word === '--seed' || word === '--random-seed' || word === '--random_seed') {
      const value = words[index + 1];
      if (value !== undefined) return value;
    }
    const inline = /^(?:--)?(?:seed|random[_-]seed)=(.+)$/.exec(word);
    if (inline?.[1] !== undefined) return inline[1];
  }
  const fromConfig = meta.config?.seed ?? meta.config?.random_seed;
  return typeof fromConfig === 'number' || typeof fromConfig === 'string' ? String(fromConfig) : undefined;
}

async function gitState(cwd: string, timeoutMs: number, signal: AbortSignal): Promise<LaunchRecord['git']> {
  const git = (...args: string[]) => runCommand(['git', '-C', cwd, ...args], { cwd, timeoutMs, signal });
  const head = await git('rev-parse', 'HEAD');
  if (!head.ok || head.stdout.trim() === '') return undefined;
  const status = await git('status', '--porcelain');
  const dirty = status.stdout.trim() !== '';
  if (!dirty) return { commit: head.stdout.trim(), dirty };
  const diff = await git('diff', 'HEAD', '--no-color');
  // Untracked files are not in `git diff HEAD`; their names at least are part of the dirt.
  const untracked = status.stdout
    .split('\n')
    .filter((line) => line.startsWith('?? '))
    .map((line) => `# untracked: ${line.slice(3)}`);
  const text = [diff.stdout.trimEnd(), ...untracked].filter((part) => part !== '').join('\n');
  return {
    commit: head.stdout.trim(),
    dirty,
    diff: text.slice(0, MAX_DIFF_CHARS),
    ...(text.length > MAX_DIFF_CHARS ? { diffTruncated: true } : {}),
  };
}

async function sha256Of(file: string): Promise<string | undefined> {
  try {
    return createHash('sha256')
      .update(await readFile(file))
      .digest('hex');
  } catch {
    return undefined;
  }
}

export function createLaunchCapture(options: LaunchCaptureOptions) {
  const now = options.now ?? (() => new Date());

  function baseRecord(meta: RunMeta, scriptSha256: string | undefined): LaunchRecord {
    return {
      schemaVersion: 1,
      runId: meta.id,
      launch: meta.launchCount,
      recordedAt: now().toISOString(),
      backend: BACKEND_LABELS[meta.executor].title,
      command: meta.command ?? [options.python, '-u', RUN_FILES.script, ...(meta.args ?? [])],
      scriptVersion: meta.scriptVersion,
      ...definedOnly({
        cwd: meta.cwd,
        args: meta.args,
        config: meta.config,
        scriptSha256,
        seed: seedOf(meta),
        modelId: meta.modelId,
        environmentName: meta.environmentName,
      }),
    };
  }

  /** Why the environment cannot be probed from this host, or undefined when it can. */
  function unprobeable(meta: RunMeta): string | undefined {
    if (meta.executor !== 'local')
      return `runs on ${BACKEND_LABELS[meta.executor].title}; its environment is not probed from this host`;
    if (engineOf(meta, options.container) !== undefined) return 'runs in a container image; not probed';
    const spec = meta.environmentName === undefined ? undefined : options.environments[meta.environmentName];
    if (spec?.container !== undefined) return `runs in the Apptainer image ${spec.container}; not probed`;
    return undefined;
  }

  /** The run's interpreter (a `conda run … python` prefix included) and its variables. */
  function probeInvocation(meta: RunMeta, runDir: string) {
    const plan = localLaunchPlan({
      meta,
      runDir,
      python: options.python,
      environments: options.environments,
      gpuIndices: meta.gpuIndices,
      runtimeDir: PYTHON_RUNTIME_DIR,
    });
    const argv = plan.argv ?? [options.python];
    const pythonAt = argv.findIndex((word) => PYTHON_WORD.test(path.basename(word)));
    const python = pythonAt === -1 ? ['python3'] : argv.slice(0, pythonAt + 1);
    const env = launchEnvironment(
      options.inherited,
      { meta, runDir, gpuIndices: meta.gpuIndices },
      PYTHON_RUNTIME_DIR,
      plan,
    );
    return { python, env, cwd: plan.cwd };
  }

  async function probe(meta: RunMeta, runDir: string): Promise<Partial<LaunchRecord>> {
    const reason = unprobeable(meta);
    if (reason !== undefined) return { environmentNote: reason };
    let invocation: ReturnType<typeof probeInvocation>;
    try {
      invocation = probeInvocation(meta, runDir);
    } catch (error) {
      return { environmentNote: `not probed: ${errorMessage(error).slice(0, 200)}` };
    }
    const { python, env, cwd } = invocation;
    const perProbeS = Math.max(1, Math.floor(options.timeoutMs / 3000));
    const result = await runCommand(
      [...python, path.join(PYTHON_RUNTIME_DIR, PROBE_FILE), String(perProbeS)],
      { cwd, env, timeoutMs: options.timeoutMs, signal: closing.signal },
    );
    const last = result.stdout.trim().split('\n').pop() ?? '';
    if (!result.ok || last === '') return { environmentNote: `probe failed: ${result.error ?? 'no output'}` };
    try {
      return { environment: parseLaunchEnvironment(JSON.parse(last)) };
    } catch (error) {
      return { environmentNote: `probe answered something else: ${errorMessage(error).slice(0, 200)}` };
    }
  }

  /** What the launch names (script, command, arguments, config, model id) matched to the thread's revisions. */
  async function resolvedRevisions(meta: RunMeta, script: string | undefined) {
    if (options.hubRevisions === undefined) return undefined;
    const source = script === undefined ? '' : await readFile(script, 'utf8').catch(() => '');
    const text = [
      source,
      ...(meta.command ?? []),
      ...(meta.args ?? []),
      JSON.stringify(meta.config ?? {}),
      meta.modelId ?? '',
    ].join('\n');
    const found = await options.hubRevisions(meta.threadId, text).catch((error: unknown) => {
      options.logger.warn({ runId: meta.id, err: error }, 'could not read the thread’s Hub revisions');
      return [];
    });
    return found.length === 0 ? undefined : found;
  }

  async function captureNow(meta: RunMeta): Promise<void> {
    const runDir = options.runDir(meta.id);
    const script =
      meta.scriptPath ?? (meta.command === undefined ? path.join(runDir, RUN_FILES.script) : undefined);
    const base = baseRecord(meta, script === undefined ? undefined : await sha256Of(script));
    const git = await (takeGitSnapshot(meta) ?? gitOf(meta));
    const hubRevisions = await resolvedRevisions(meta, script);
    const record: LaunchRecord = { ...base, ...definedOnly({ git, hubRevisions }) };
    // A closed capture writes nothing more: the bot has stopped and the run directory may be going away.
    if (closing.signal.aborted) return;
    await writeLaunchRecord(runDir, record);
    const probed = await probe(meta, runDir);
    if (closing.signal.aborted) return;
    await writeLaunchRecord(runDir, { ...record, ...probed });
  }

  // Aborted by `close`: kills the probes and git commands still running.
  const closing = new AbortController();
  const gitOf = (meta: RunMeta) =>
    meta.cwd === undefined
      ? Promise.resolve(undefined)
      : gitState(meta.cwd, options.timeoutMs, closing.signal);
  // The tree as it was before the spawn, by run and launch (a script that writes into its cwd at once
  // would otherwise show as a dirty tree).
  const gitSnapshots = new Map<string, Promise<LaunchRecord['git']>>();
  const snapshotKey = (meta: RunMeta) => `${meta.id}:${meta.launchCount}`;
  function takeGitSnapshot(meta: RunMeta) {
    const snapshot = gitSnapshots.get(snapshotKey(meta));
    gitSnapshots.delete(snapshotKey(meta));
    return snapshot;
  }

  // Captures under way: stopping waits for them, so none writes into a run directory being removed.
  const underWay = new Set<Promise<void>>();
  return {
    /** Reads the run's git state before its process starts; waits at most GIT_BEFORE_SPAWN_MS. */
    async beforeSpawn(meta: RunMeta): Promise<void> {
      if (meta.cwd === undefined) return;
      const snapshot = gitOf(meta).catch(() => undefined);
      // Only the newest launch of a run is kept (a launch that failed to spawn leaves its entry behind).
      for (const key of gitSnapshots.keys()) if (key.startsWith(`${meta.id}:`)) gitSnapshots.delete(key);
      gitSnapshots.set(snapshotKey(meta), snapshot);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        snapshot,
        new Promise((resolve) => (timer = setTimeout(resolve, GIT_BEFORE_SPAWN_MS))),
      ]);
      clearTimeout(timer);
    },
    /** Starts the capture of this launch and returns at once; failures are logged, never thrown. */
    capture(meta: RunMeta): void {
      if (closing.signal.aborted) return;
      const capturing = captureNow(meta).catch((error: unknown) =>
        options.logger.warn({ runId: meta.id, err: error }, 'could not record the launch environment'),
      );
      underWay.add(capturing);
      void capturing.finally(() => underWay.delete(capturing));
    },
    /**
     * Resolves when every capture started so far has finished (each is bounded by `timeoutMs`), or after
     * `waitMs`: a stopping bot does not hold its shutdown for a slow `pip freeze`.
     */
    async settle(waitMs = Number.POSITIVE_INFINITY): Promise<void> {
      const all = Promise.all(underWay).then(() => undefined);
      if (!Number.isFinite(waitMs)) return all;
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, waitMs);
      });
      await Promise.race([all, waited]);
      clearTimeout(timer);
    },
    /**
     * Stopping: lets the captures under way finish for at most `waitMs`, then kills their probes and
     * waits until none is left, so nothing writes into a run directory once the bot has stopped.
     */
    async close(waitMs: number): Promise<void> {
      await this.settle(waitMs);
      closing.abort();
      await Promise.all(underWay);
    },
  };
}
