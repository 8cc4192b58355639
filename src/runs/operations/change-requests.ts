import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { createTwoFilesPatch } from 'diff';
import type { ChatUser } from '../../bot/chat-adapter.js';
import { definedOnly } from '../../defined-only.js';
import { RunError } from '../../errors.js';
import { redactSecrets } from '../../text/redact.js';
import { refuseScriptEdit } from '../launch/command-script.js';
import { assertScriptSize } from '../launch/workspace-script.js';
import { RUN_FILES } from '../records/run-files.js';
import type { RunMeta } from '../records/run-types.js';
import { checkMaxHours } from '../time-limit.js';
import type { LaunchChecks } from './launch-checks.js';
import type { RunOperations, RunOperationsOptions } from './operation-types.js';
import type { RunChange, RunChangeVia } from './run-access.js';

type ChangeRequests = Pick<RunOperations, 'pause' | 'resume' | 'stop' | 'updateScript'>;

/** Changes to an existing run, each checked (and audited) against who may make it. */
export function createChangeRequests(options: RunOperationsOptions, checks: LaunchChecks): ChangeRequests {
  const { runs, queries, approvals } = options;

  /** Finds the run and checks (and audits) that `actor`, acting in `threadId`, may make `change`. */
  async function authorized(
    reference: string,
    actor: ChatUser,
    threadId: string,
    change: RunChange,
    via: RunChangeVia,
  ): Promise<RunMeta> {
    const meta = await queries.find(reference);
    await options.access?.authorize(meta, actor, threadId, change, via);
    return meta;
  }

  async function pause(reference: string, actor: ChatUser, threadId: string, via: RunChangeVia) {
    const target = await authorized(reference, actor, threadId, 'pause', via);
    const meta = await runs.pause(target.id, actor);
    const report = await queries.status(meta.id);
    const step = report.resume?.step;
    return `Paused ${meta.name}${step === undefined || step === null ? '' : ` at checkpoint step ${step}`}; its GPUs are free.`;
  }

  async function resume(
    reference: string,
    actor: ChatUser,
    threadId: string,
    origin: 'agent' | 'command',
    toolCall?: { name: string; input: unknown },
    where?: { on?: string },
  ): Promise<string> {
    let meta = await authorized(reference, actor, threadId, 'resume', origin);
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
    if (where?.on !== undefined) meta = await runs.moveToBackend(meta.id, where.on);
    if (meta.gpus === 0) {
      const resumed = await runs.resume(meta.id, actor);
      return `Resumed ${resumed.name}: ${resumed.status}.`;
    }
    // Asking for GPUs again needs a new decision.
    const script = await queries.readScript(meta.id).catch(() => '');
    await checks.assertCompiles(script, meta.threadId, origin, `${meta.name} was not resumed`);
    const { approval, autoApproved } = await approvals.request({
      kind: 'resume',
      meta,
      requester: actor,
      scriptExcerpt: script,
      origin,
      ...checks.launchDetails(meta, script),
      ...definedOnly({ toolCall }),
    });
    return autoApproved
      ? `Resuming ${meta.name} (auto-approved).`
      : `Resuming ${meta.name} asks for ${meta.gpus} GPUs again, so it needs approval (card posted, approval ${approval.id}).`;
  }

  async function stop(reference: string, actor: ChatUser, threadId: string, via: RunChangeVia) {
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
        ? await queries.find(reference)
        : await authorized(reference, actor, threadId, 'update_script', origin);
    // A finished run's script can never be applied: say so now rather than after someone approves.
    if (meta.status === 'stopped' || meta.status === 'completed' || meta.status === 'rejected') {
      throw new RunError('run_finished', `run ${meta.name} is ${meta.status}; start a new run instead`);
    }
    refuseScriptEdit(meta);
    assertScriptSize(script);
    await checks.assertCompiles(script, meta.threadId, origin, `the change to ${meta.name} was not proposed`);
    // A command run's script lives in the workspace: the diff is against what is there now.
    const current =
      meta.scriptPath === undefined
        ? await queries.readScript(meta.id)
        : await readFile(meta.scriptPath, 'utf8');
    if (current === script)
      return { text: `The script of ${meta.name} is already exactly that; nothing to change.`, diff: '' };
    const preflight =
      meta.command === undefined
        ? await checks.runPreflight(meta.threadId, meta.name, script, meta.config)
        : undefined;
    const shown = meta.scriptPath === undefined ? RUN_FILES.script : basename(meta.scriptPath);
    const diff = scriptDiff(meta, shown, current, script);
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

  return { pause, resume, stop, updateScript };
}

function scriptDiff(meta: RunMeta, shown: string, current: string, proposed: string): string {
  return createTwoFilesPatch(
    meta.scriptPath === undefined ? `train_v${meta.scriptVersion}.py` : `${shown} (v${meta.scriptVersion})`,
    shown,
    current,
    proposed,
    '',
    '',
    { context: 3 },
  );
}
