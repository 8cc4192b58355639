import { lstat, readFile, realpath } from 'node:fs/promises';
import { basename, isAbsolute, resolve, sep } from 'node:path';
import { createTwoFilesPatch } from 'diff';
import type { ApprovalService } from '../approvals/approval-service.js';
import type { ChatUser } from '../bot/chat-adapter.js';
import { definedOnly } from '../defined-only.js';
import { errorMessage, RunError, ToolPolicyError } from '../errors.js';
import { codeBlock } from '../notify/code-block.js';
import { redactSecrets } from '../redact.js';
import {
  commandWarnings,
  formatCommand,
  type PreparedCommand,
  prepareCommand,
  recordProvenance,
} from '../tools/command-launch.js';
import { refuseScriptEdit } from './command-script.js';
import type { RunAccess, RunChange, RunChangeVia } from './run-access.js';
import { describeEnvironment, type Environments, pickEnvironment } from './run-environments.js';
import { RUN_FILES } from './run-files.js';
import type { CreateRunRequest, RunService } from './run-service.js';
import type { RunStore } from './run-store.js';
import type { RunMeta } from './run-types.js';
import { checkMaxHours } from './time-limit.js';

/**
 * The run actions shared by agent tools and plain commands, so both follow exactly the same approval
 * rules. Each returns a sentence for the thread; expected failures (unknown run, too many GPUs) come
 * back as `RunError`/`ToolPolicyError` with a message written for people.
 */

export const MAX_SCRIPT_BYTES = 512 * 1024;

/** A run request plus who launched it and how (an agent tool call resumes its turn on decision). */
export interface LaunchInput extends CreateRunRequest {
  origin: 'agent' | 'command';
  toolCall?: { name: string; input: unknown };
  /** Named environment asked for (`--env`); the configured default applies when absent. */
  environment?: string;
  /** A command run, already checked against the workspace. */
  prepared?: PreparedCommand;
}

/** Flags shared by `run <file>` and `run -- <command>`. */
export interface RunFlags {
  gpus?: number;
  runName?: string;
  maxHours?: number;
  env?: string;
  cwd?: string;
  nodes?: number;
}

export interface RunOperationsOptions {
  runs: RunService;
  store: RunStore;
  approvals: ApprovalService;
  workspace: string;
  /** Who may pause, resume, stop or edit a run (absent: anyone, as before; tests of the bare core). */
  access?: RunAccess;
  /** `SHEPHERD_MAX_HOURS`: a resume of a run above it is refused before any card. */
  maxHours?: number;
  /** Checks a proposed script; resolves an error text or undefined when it compiles. */
  checkSyntax?: (source: string) => Promise<string | undefined>;
  /** The CPU pre-flight (when enabled): resolves the line the approval card shows. */
  preflight?: (source: string, config?: Record<string, unknown>) => Promise<string>;
  /** Posts into a thread (a script that does not compile is reported there, whoever asked). */
  notify?: (threadId: string, text: string) => Promise<void>;
  /** The agent's latest memory estimate in this thread for this model, shown on its launch card. */
  memoryEstimate?: (threadId: string, modelId: string | undefined) => Promise<string | undefined>;
  /** `SHEPHERD_ENVIRONMENTS` and `SHEPHERD_DEFAULT_ENV`. */
  environments?: Environments;
  defaultEnvironment?: string | undefined;
  /** `SHEPHERD_PYTHON`, for `run <script.py> --cwd DIR` (a command run of that script). */
  python?: string;
  /** Stopping a watched run asks for a confirmation button first; this posts it. */
  confirmStop?: (meta: RunMeta, actor: ChatUser) => Promise<string>;
}

export function describeRun(meta: RunMeta): string {
  const where =
    meta.gpuIndices.length > 0
      ? ` on GPUs ${meta.gpuIndices.join(',')}`
      : meta.jobId
        ? ` (Slurm job ${meta.jobId})`
        : '';
  const step = meta.lastStep === undefined ? '' : `, step ${meta.lastStep}`;
  const reason = meta.statusReason === undefined ? '' : ` — ${meta.statusReason}`;
  if (meta.watch !== undefined) {
    const source =
      meta.watch.source === 'slurm'
        ? `Slurm job ${meta.jobId ?? '?'}`
        : `${meta.watch.logPath}${meta.watch.pid === undefined ? '' : `, pid ${meta.watch.pid}`}`;
    return `${meta.name} (${meta.id}): watched, ${meta.status.replace('_', ' ')} (${source})${step}${reason}`;
  }
  const environment = meta.environmentName === undefined ? '' : `, env ${meta.environmentName}`;
  return `${meta.name} (${meta.id}): ${meta.status.replace('_', ' ')}${where}, ${meta.gpus} GPU${meta.gpus === 1 ? '' : 's'}${environment}${step}${reason}`;
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

export function createRunOperations(options: RunOperationsOptions) {
  const { runs, store, approvals } = options;

  /**
   * No card for a script that does not compile: the error (with its line) goes to whoever asked — the
   * command's answer, the agent's tool result — and, for the agent, into the thread as well.
   */
  async function assertCompiles(
    script: string,
    threadId: string,
    origin: 'agent' | 'command' | 'monitor',
    what: string,
  ): Promise<void> {
    // Command runs without a Python file (`run -- bash train.sh`) have no source to compile.
    if (script.trim() === '') return;
    const syntaxError = await options.checkSyntax?.(script);
    if (syntaxError === undefined) return;
    const message = `${what}: ${syntaxError}\nNo approval card was posted.`;
    if (origin === 'agent') {
      await options.notify?.(threadId, `⚠️ ${message}`).catch(() => undefined);
    }
    throw new ToolPolicyError('script_syntax_error', message);
  }

  /** The pre-flight takes up to its timeout: the thread hears that it is running. */
  async function runPreflight(
    threadId: string,
    name: string,
    script: string,
    config: Record<string, unknown> | undefined,
  ): Promise<string | undefined> {
    if (options.preflight === undefined) return undefined;
    await options
      .notify?.(threadId, `Running a short CPU pre-flight of ${name} before the approval card…`)
      .catch(() => undefined);
    return options.preflight(script, config);
  }

  const environments = options.environments ?? {};

  /** Card lines for how a run starts: the exact command, the environment, warnings. */
  function launchDetails(meta: RunMeta): { command?: string; environment?: string; warnings?: string[] } {
    const spec = meta.environmentName === undefined ? undefined : environments[meta.environmentName];
    return {
      ...(meta.command === undefined ? {} : { command: formatCommand(meta.command) }),
      ...(meta.environmentName === undefined
        ? {}
        : {
            environment:
              spec === undefined ? meta.environmentName : describeEnvironment(meta.environmentName, spec),
          }),
      warnings: commandWarnings(meta),
    };
  }

  async function launch(input: LaunchInput): Promise<string> {
    if (Buffer.byteLength(input.script) > MAX_SCRIPT_BYTES) {
      throw new ToolPolicyError('script_too_large', 'the script is larger than 512 KiB');
    }
    // An unknown environment is refused here, before any run or card exists.
    const environment = pickEnvironment(environments, input.environment, options.defaultEnvironment);
    await assertCompiles(input.script, input.threadId, input.origin, `${input.name} was not launched`);
    const { origin: _origin, toolCall: _toolCall, environment: _environment, prepared, ...request } = input;
    const launchFields = {
      ...request.launch,
      ...(environment === undefined ? {} : { environmentName: environment.name }),
      ...(prepared === undefined
        ? {}
        : {
            command: prepared.argv,
            cwd: prepared.cwd,
            ...definedOnly({ scriptPath: prepared.scriptPath }),
          }),
    };
    // Created first, so a request the run service refuses (too many GPUs) costs no pre-flight.
    const meta = await runs.createRun(
      Object.keys(launchFields).length === 0 ? request : { ...request, launch: launchFields },
    );
    if (prepared !== undefined) {
      await recordProvenance(
        store.runDir(meta.id),
        options.workspace,
        prepared,
        environment?.name,
        new Date(),
      );
    }
    // A command run (`run -- …`) is not `python train.py`: the pre-flight only runs plain scripts.
    const preflight =
      prepared === undefined
        ? await runPreflight(input.threadId, meta.name, input.script, input.config)
        : undefined;
    const memory =
      input.origin === 'agent' ? await options.memoryEstimate?.(input.threadId, input.modelId) : undefined;
    const { approval, autoApproved } = await approvals.request(
      definedOnly({
        kind: 'start' as const,
        meta,
        requester: input.requester,
        // The whole script: the card shows it, or its start with the file attached.
        scriptExcerpt: input.script,
        origin: input.origin,
        preflight,
        memory,
        ...launchDetails(meta),
        toolCall: input.toolCall,
      }),
    );
    return autoApproved
      ? `Run ${meta.name} (${meta.id}) was auto-approved (est. $${approval.costUsd}) and is starting.`
      : `Approval requested for run ${meta.name} (${meta.id}): ${meta.gpus} GPU${meta.gpus === 1 ? '' : 's'}, max ${meta.maxHours} h, est. $${approval.costUsd}. It starts once a teammate clicks Approve on the card (approval ${approval.id}).`;
  }

  async function list(): Promise<string> {
    const all = await runs.listRuns();
    if (all.length === 0) return 'No training runs yet.';
    return all
      .slice(0, 30)
      .map((meta) => `• ${describeRun(meta)}`)
      .join('\n');
  }

  async function status(reference: string): Promise<string> {
    const report = await runs.status(reference);
    const lines = [describeRun(report.meta)];
    if (report.meta.command !== undefined) lines.push(`command: ${formatCommand(report.meta.command)}`);
    const last = report.lastMetrics.at(-1);
    if (last !== undefined) {
      const values = Object.entries(last.values)
        .map(([name, value]) => `${name}=${formatNumber(value)}`)
        .join(', ');
      const source = report.metricsSource === 'stdout' ? ', read from output.log' : '';
      lines.push(`last metrics (step ${last.step ?? '?'}${source}): ${values}`);
    }
    if (report.lastMetrics.length >= 2) {
      const first = report.lastMetrics[0]?.values.loss;
      const latest = last?.values.loss;
      if (first !== undefined && latest !== undefined) {
        lines.push(
          `loss trend over the last ${report.lastMetrics.length} points: ${formatNumber(first)} → ${formatNumber(latest)}`,
        );
      }
    }
    if (report.resume?.step !== undefined && report.resume.step !== null) {
      lines.push(`last checkpoint: step ${report.resume.step}`);
    }
    if (report.meta.exitCode !== undefined) lines.push(`exit code: ${report.meta.exitCode}`);
    if (report.logTail.length > 0)
      lines.push(`last log lines:\n${codeBlock(report.logTail.slice(-8).join('\n'))}`);
    return lines.join('\n');
  }

  /** Finds the run and checks (and audits) that `actor`, acting in `threadId`, may make `change`. */
  async function authorized(
    reference: string,
    actor: ChatUser,
    threadId: string,
    change: RunChange,
    via: RunChangeVia,
  ): Promise<RunMeta> {
    const meta = await runs.findRun(reference);
    await options.access?.authorize(meta, actor, threadId, change, via);
    return meta;
  }

  async function pause(
    reference: string,
    actor: ChatUser,
    threadId: string,
    via: RunChangeVia,
  ): Promise<string> {
    const target = await authorized(reference, actor, threadId, 'pause', via);
    const meta = await runs.pause(target.id, actor);
    const report = await runs.status(meta.id);
    const step = report.resume?.step;
    return `Paused ${meta.name}${step === undefined || step === null ? '' : ` at checkpoint step ${step}`}; its GPUs are free.`;
  }

  async function resume(
    reference: string,
    actor: ChatUser,
    threadId: string,
    origin: 'agent' | 'command',
    toolCall?: { name: string; input: unknown },
  ) {
    const meta = await authorized(reference, actor, threadId, 'resume', origin);
    if (meta.watch !== undefined) {
      throw new RunError(
        'watched_run',
        `${meta.name} is a watched run: Shepherd did not launch it, so it cannot relaunch it`,
      );
    }
    if (meta.status !== 'paused' && meta.status !== 'failed') {
      throw new RunError(
        'illegal_transition',
        `${meta.name} is ${meta.status.replace('_', ' ')}; only paused or failed runs can be resumed`,
      );
    }
    if (options.maxHours !== undefined) checkMaxHours(meta.maxHours, options.maxHours);
    if (meta.gpus === 0) {
      const resumed = await runs.resume(meta.id, actor);
      return `Resumed ${resumed.name}: ${resumed.status}.`;
    }
    // Asking for GPUs again needs a new decision.
    const script = await store.readScript(meta.id).catch(() => '');
    await assertCompiles(script, meta.threadId, origin, `${meta.name} was not resumed`);
    const { approval, autoApproved } = await approvals.request({
      kind: 'resume',
      meta,
      requester: actor,
      scriptExcerpt: script,
      origin,
      ...launchDetails(meta),
      ...definedOnly({ toolCall }),
    });
    return autoApproved
      ? `Resuming ${meta.name} (auto-approved).`
      : `Resuming ${meta.name} asks for ${meta.gpus} GPUs again, so it needs approval (card posted, approval ${approval.id}).`;
  }

  async function stop(
    reference: string,
    actor: ChatUser,
    threadId: string,
    via: RunChangeVia,
  ): Promise<string> {
    const found = await authorized(reference, actor, threadId, 'stop', via);
    if (found.watch !== undefined && options.confirmStop !== undefined && found.status === 'running') {
      return options.confirmStop(found, actor);
    }
    const meta = await runs.stop(found.id, actor, 'stopped from the thread');
    return `Stopped ${meta.name}.`;
  }

  async function updateScript(
    reference: string,
    script: string,
    reason: string,
    actor: ChatUser,
    threadId: string,
    origin: 'agent' | 'command' | 'monitor',
    toolCall?: { name: string; input: unknown },
  ): Promise<{ text: string; diff: string }> {
    // A monitor proposal comes from Shepherd's own triage, which a person allowed with the fix button.
    const meta =
      origin === 'monitor'
        ? await runs.findRun(reference)
        : await authorized(reference, actor, threadId, 'update_script', origin);
    // A finished run's script can never be applied: say so now rather than after someone approves.
    if (meta.status === 'stopped' || meta.status === 'completed' || meta.status === 'rejected') {
      throw new RunError('run_finished', `run ${meta.name} is ${meta.status}; start a new run instead`);
    }
    refuseScriptEdit(meta);
    if (Buffer.byteLength(script) > MAX_SCRIPT_BYTES) {
      throw new ToolPolicyError('script_too_large', 'the script is larger than 512 KiB');
    }
    await assertCompiles(script, meta.threadId, origin, `the change to ${meta.name} was not proposed`);
    // A command run's script lives in the workspace: the diff is against what is there now.
    const current =
      meta.scriptPath === undefined
        ? await store.readScript(meta.id)
        : await readFile(meta.scriptPath, 'utf8');
    if (current === script)
      return { text: `The script of ${meta.name} is already exactly that; nothing to change.`, diff: '' };
    const preflight =
      meta.command === undefined
        ? await runPreflight(meta.threadId, meta.name, script, meta.config)
        : undefined;
    const shown = meta.scriptPath === undefined ? RUN_FILES.script : basename(meta.scriptPath);
    const diff = createTwoFilesPatch(
      meta.scriptPath === undefined ? `train_v${meta.scriptVersion}.py` : `${shown} (v${meta.scriptVersion})`,
      shown,
      current,
      script,
      '',
      '',
      { context: 3 },
    );
    const { approval } = await approvals.request({
      kind: 'script-change',
      meta,
      requester: actor,
      // The card shows the diff redacted; the approved script itself is applied as written.
      scriptExcerpt: redactSecrets(diff),
      proposedScript: script,
      reason,
      origin,
      ...definedOnly({ preflight, toolCall }),
    });
    return {
      text: `Script change for ${meta.name} proposed (approval ${approval.id}); once approved, ${shown} becomes v${meta.scriptVersion + 1}, the old version is archived as train_v${meta.scriptVersion}.py in the run directory and the run restarts from its last checkpoint.`,
      diff,
    };
  }

  async function cluster(): Promise<string> {
    const info = await runs.clusterInfo();
    const lines = [`executor: ${info.executor}; GPUs: ${info.gpusTotal} total, ${info.gpusFree} free`];
    for (const entry of info.gpusByRun) {
      lines.push(
        `• ${entry.name}: ${entry.gpus} GPU${entry.gpus === 1 ? '' : 's'}${entry.indices.length ? ` (${entry.indices.join(',')})` : ''}`,
      );
    }
    for (const node of info.nodes ?? []) {
      lines.push(
        `• node ${node.name}: ${node.state}, GPUs ${node.gpusAllocated}/${node.gpusTotal} allocated`,
      );
    }
    if (info.queueLength !== undefined) lines.push(`queue length: ${info.queueLength}`);
    if (info.hostLoad.length > 0)
      lines.push(`host load: ${info.hostLoad.map((value) => value.toFixed(2)).join(' ')}`);
    for (const note of info.notes ?? []) lines.push(note);
    return lines.join('\n');
  }

  /** `run -- <command …>` (and `run train.sh`): any argv, in the workspace or `--cwd` inside it. */
  async function runCommand(
    argv: string[],
    flags: RunFlags,
    threadId: string,
    actor: ChatUser,
    from: { origin: 'agent' | 'command'; toolCall?: { name: string; input: unknown } } = {
      origin: 'command',
    },
  ): Promise<string> {
    const prepared = await prepareCommand(options.workspace, argv, flags.cwd);
    return launch({
      name: flags.runName ?? prepared.suggestedName,
      script: prepared.script,
      gpus: flags.gpus ?? 0,
      threadId,
      requester: actor,
      origin: from.origin,
      ...definedOnly({ toolCall: from.toolCall }),
      prepared,
      ...definedOnly({ environment: flags.env }),
      ...(flags.nodes === undefined ? {} : { launch: { nodes: flags.nodes } }),
      ...definedOnly({ maxHours: flags.maxHours }),
    });
  }

  async function runWorkspaceScript(
    path: string,
    flags: RunFlags,
    threadId: string,
    actor: ChatUser,
  ): Promise<string> {
    if (path.endsWith('.sh') || flags.cwd !== undefined) {
      // A shell script runs with bash, in the workspace, like any command.
      return runCommand(
        path.endsWith('.sh') ? ['bash', path] : [options.python ?? 'python3', '-u', path],
        flags,
        threadId,
        actor,
      );
    }
    const real = await resolveWorkspaceScript(options.workspace, path);
    const script = await readFile(real, 'utf8');
    const name = flags.runName ?? basename(real).replace(/\.py$/, '').replace(/_/g, '-');
    return launch({
      name,
      script,
      gpus: flags.gpus ?? 0,
      threadId,
      requester: actor,
      origin: 'command',
      ...definedOnly({ environment: flags.env }),
      ...(flags.nodes === undefined ? {} : { launch: { nodes: flags.nodes } }),
      ...definedOnly({ maxHours: flags.maxHours }),
    });
  }

  return { launch, list, status, pause, resume, stop, updateScript, cluster, runWorkspaceScript, runCommand };
}

export type RunOperations = ReturnType<typeof createRunOperations>;

function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  return Math.abs(value) >= 1000 || Number.isInteger(value) ? String(value) : value.toPrecision(4);
}

/** A sentence for an expected failure, or a rethrow for a bug. */
export function userFacingError(error: unknown): string {
  if (error instanceof RunError || error instanceof ToolPolicyError) return error.message;
  return `something went wrong: ${errorMessage(error)}`;
}
