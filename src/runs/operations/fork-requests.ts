import { cp } from 'node:fs/promises';
import path from 'node:path';
import type { ChatUser } from '../../bot/chat-adapter.js';
import { definedOnly } from '../../defined-only.js';
import { errorMessage, RunError } from '../../errors.js';
import type { CheckpointEntry } from '../checkpoints/checkpoint-entries.js';
import { plural } from '../lifecycle/run-events.js';
import { writeFileAtomic } from '../records/atomic-file.js';
import { RUN_FILES } from '../records/run-files.js';
import type { RunMeta } from '../records/run-types.js';
import { applySettings, type ForkRequest } from './fork-config.js';
import type { LaunchChecks } from './launch-checks.js';
import type { RunOperationsOptions } from './operation-types.js';

/**
 * `fork <run> [--from-step N] [--set key=value …] [--name X] [--gpus N]`: a new run that starts from a
 * checkpoint of an old one, with changed settings, through the usual approval card (which lists the
 * changes). The chosen checkpoint is copied into the fork's directory (`fork-checkpoint/`) and its
 * resume.json points at the copy, so the parent may go on writing or deleting its own checkpoints.
 */

const FORK_CHECKPOINT_DIR = 'fork-checkpoint';

const usable = (entry: CheckpointEntry) => entry.intact !== false || entry.pinned !== undefined;

/** The newest save among `entries` (the later of a step saved twice). */
function newest(entries: readonly CheckpointEntry[]): CheckpointEntry | undefined {
  return [...entries].sort((a, b) => a.step - b.step || a.ts - b.ts).at(-1);
}

function stepsOf(entries: readonly CheckpointEntry[]): string {
  const steps = [...new Set(entries.filter(usable).map((entry) => entry.step))].sort((a, b) => a - b);
  return steps.length === 0 ? 'none is left on disk' : `steps ${steps.join(', ')}`;
}

/** The checkpoint a fork starts from: the step asked for, else the newest healthy one still on disk. */
function chooseForkPoint(
  parent: Pick<RunMeta, 'name'>,
  entries: readonly CheckpointEntry[],
  fromStep: number | undefined,
): CheckpointEntry {
  if (entries.length === 0) {
    throw new RunError(
      'invalid_run',
      `${parent.name} recorded no checkpoint (shepherd.save_checkpoint), so there is nothing to fork from`,
    );
  }
  if (fromStep !== undefined) {
    const atStep = newest(entries.filter((entry) => entry.step === fromStep && usable(entry)));
    if (atStep === undefined) {
      throw new RunError(
        'invalid_run',
        `${parent.name} has no checkpoint at step ${fromStep}; its checkpoints: ${stepsOf(entries)}`,
      );
    }
    return atStep;
  }
  const best = newest(entries.filter((entry) => entry.health !== 'bad' && usable(entry)));
  if (best === undefined) {
    throw new RunError(
      'invalid_run',
      `${parent.name} has no healthy checkpoint left to fork from (checkpoints: ${stepsOf(entries)}); pick one with --from-step N`,
    );
  }
  return best;
}

/** Copies the chosen checkpoint into the fork and points the fork's resume.json at the copy. */
async function placeCheckpoint(parentDir: string, forkDir: string, entry: CheckpointEntry, parent: RunMeta) {
  let checkpoint: string | null = null;
  if (entry.checkpoint !== null) {
    const source = entry.pinned ?? path.resolve(parentDir, entry.checkpoint);
    checkpoint = path.join(FORK_CHECKPOINT_DIR, path.basename(entry.checkpoint));
    try {
      await cp(source, path.join(forkDir, checkpoint), { recursive: true, errorOnExist: false });
    } catch (error) {
      throw new RunError(
        'invalid_run',
        `could not copy the step-${entry.step} checkpoint of ${parent.name} (${entry.checkpoint}): ${errorMessage(error)}`,
        { cause: error },
      );
    }
  }
  const state = { ...entry.extra, step: entry.step, checkpoint, ts: entry.ts, forked_from: parent.id };
  await writeFileAtomic(path.join(forkDir, RUN_FILES.resume), JSON.stringify(state));
}

export function createForkRequests(options: RunOperationsOptions, checks: LaunchChecks) {
  const { runs, queries, approvals } = options;

  return async function fork(
    reference: string,
    request: ForkRequest,
    actor: ChatUser,
    threadId: string,
  ): Promise<string> {
    const parent = await queries.find(reference);
    if (parent.watch !== undefined) {
      throw new RunError(
        'watched_run',
        `${parent.name} is a watched run: Shepherd has no script of it to fork`,
      );
    }
    if (options.checkpoints === undefined) throw new RunError('invalid_run', 'forks are not available here');
    const entry = chooseForkPoint(parent, await options.checkpoints.list(parent.id), request.fromStep);
    const configuration = applySettings(parent, request.settings);
    const gpus = request.gpus ?? parent.gpus;
    const changes = [
      ...configuration.changes,
      ...(gpus === parent.gpus ? [] : [`gpus: ${parent.gpus} → ${gpus}`]),
    ];
    const script = await queries.readScript(parent.id).catch(() => '');
    const meta = await runs.createRun({
      name: request.runName ?? `${parent.name}-fork`,
      script,
      gpus,
      maxHours: parent.maxHours,
      threadId,
      requester: actor,
      backend: parent.executor,
      ...definedOnly({
        modelId: parent.modelId,
        config: configuration.config,
        args: configuration.args,
      }),
      launch: {
        forkOf: { runId: parent.id, runName: parent.name, step: entry.step, checkpoint: entry.checkpoint },
        ...definedOnly({
          command: configuration.command,
          cwd: parent.cwd,
          scriptPath: parent.scriptPath,
          environmentName: parent.environmentName,
          nodes: parent.nodes,
          image: parent.image,
          flavor: parent.flavor,
        }),
      },
    });
    await placeCheckpoint(queries.runDirectory(parent.id), queries.runDirectory(meta.id), entry, parent);
    const from = `the step-${entry.step} checkpoint${entry.checkpoint === null ? '' : ` (${entry.checkpoint})`}`;
    const { approval, autoApproved } = await approvals.request(
      definedOnly({
        kind: 'start' as const,
        meta,
        requester: actor,
        scriptExcerpt: script,
        origin: 'command' as const,
        reason: `fork of ${parent.name} (${parent.id}) from ${from}`,
        changes,
        ...checks.launchDetails(meta, script),
      }),
    );
    return autoApproved
      ? `Fork ${meta.name} (${meta.id}) of ${parent.name} was auto-approved and is starting from step ${entry.step}.`
      : `Approval requested for fork ${meta.name} (${meta.id}) of ${parent.name} from step ${entry.step}: ${plural(gpus, 'GPU')}, ${changes.length === 0 ? 'same configuration' : plural(changes.length, 'change')} (approval ${approval.id}).`;
  };
}
