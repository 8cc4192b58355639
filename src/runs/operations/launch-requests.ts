import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import type { ChatUser } from '../../bot/chat-adapter.js';
import { definedOnly } from '../../defined-only.js';
import { prepareCommand, recordProvenance, resolveLogDirectory } from '../launch/command-launch.js';
import { assertScriptSize, resolveWorkspaceScript } from '../launch/workspace-script.js';
import { pickEnvironment } from '../named-environments.js';
import type { LaunchChecks } from './launch-checks.js';
import type { LaunchInput, RunFlags, RunOperations, RunOperationsOptions } from './operation-types.js';

type LaunchRequests = Pick<RunOperations, 'launch' | 'runCommand' | 'runWorkspaceScript'>;

/** New runs: a script or a command, created, checked and put in front of an approval card. */
export function createLaunchRequests(options: RunOperationsOptions, checks: LaunchChecks): LaunchRequests {
  const { runs, approvals } = options;

  async function launch(input: LaunchInput): Promise<string> {
    assertScriptSize(input.script);
    // An unknown environment is refused here, before any run or card exists.
    const environment = pickEnvironment(
      options.environments ?? {},
      input.environment,
      options.defaultEnvironment,
    );
    await checks.assertCompiles(input.script, input.threadId, input.origin, `${input.name} was not launched`);
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
        options.queries.runDirectory(meta.id),
        options.workspace,
        prepared,
        environment?.name,
        new Date(),
      );
    }
    // A command run (`run -- …`) is not `python train.py`: the pre-flight only runs plain scripts.
    const preflight =
      prepared === undefined
        ? await checks.runPreflight(input.threadId, meta.name, input.script, input.config)
        : undefined;
    const memory =
      input.origin === 'agent' ? await options.memoryEstimate?.(input.threadId, input.modelId) : undefined;
    const datasetCheck = await options.datasetCheck?.(input.threadId);
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
        datasetCheck,
        ...checks.launchDetails(meta, input.script),
        toolCall: input.toolCall,
      }),
    );
    return autoApproved
      ? `Run ${meta.name} (${meta.id}) was auto-approved (est. $${approval.costUsd}) and is starting.`
      : `Approval requested for run ${meta.name} (${meta.id}): ${meta.gpus} GPU${meta.gpus === 1 ? '' : 's'}, max ${meta.maxHours} h, est. $${approval.costUsd}. It starts once a teammate clicks Approve on the card (approval ${approval.id}).`;
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
    const logDir = await logDirectoryOf(flags);
    return launch({
      name: flags.runName ?? prepared.suggestedName,
      script: prepared.script,
      gpus: flags.gpus ?? 0,
      threadId,
      requester: actor,
      origin: from.origin,
      ...definedOnly({ toolCall: from.toolCall }),
      prepared,
      ...flagFields(flags, logDir),
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
    const logDir = await logDirectoryOf(flags);
    const script = await readFile(real, 'utf8');
    const name = flags.runName ?? basename(real).replace(/\.py$/, '').replace(/_/g, '-');
    return launch({
      name,
      script,
      gpus: flags.gpus ?? 0,
      threadId,
      requester: actor,
      origin: 'command',
      ...flagFields(flags, logDir),
    });
  }

  /** `--logdir`, checked against the workspace before any run or card exists. */
  async function logDirectoryOf(flags: RunFlags): Promise<string | undefined> {
    if (flags.logdir === undefined) return undefined;
    return resolveLogDirectory(options.workspace, flags.logdir, flags.cwd);
  }

  return { launch, runCommand, runWorkspaceScript };
}

function flagFields(flags: RunFlags, logDir: string | undefined) {
  const launch = definedOnly({
    nodes: flags.nodes,
    image: flags.image,
    flavor: flags.flavor,
    evalCommand: flags.evalCommand,
    logDir,
  });
  return {
    ...definedOnly({ environment: flags.env, backend: flags.on }),
    ...(Object.keys(launch).length === 0 ? {} : { launch }),
    ...definedOnly({ maxHours: flags.maxHours }),
  };
}
