import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import type { ChatUser } from '../bot/chat-adapter.js';
import { definedOnly } from '../defined-only.js';
import { RunError, ToolPolicyError } from '../errors.js';
import { formatCommand, prepareCommand } from '../runs/launch/command-launch.js';
import { resolveWorkspaceScript } from '../runs/launch/workspace-script.js';
import { estimateCostUsd, estimateRunCostUsd } from '../runs/run-cost.js';
import { checkMaxHours } from '../runs/time-limit.js';
import { redactSecrets } from '../text/redact.js';
import type { SweepContext } from './sweep-context.js';
import {
  describeValues,
  expandGrid,
  type GridValue,
  MAX_TRIALS,
  type SweepSpec,
  trialArgs,
} from './sweep-grid.js';
import type { Sweep, Trial } from './sweep-store.js';

/** Who asks for a sweep and where its card goes. */
interface SweepRequest {
  spec: SweepSpec;
  threadId: string;
  actor: ChatUser;
  origin: 'agent' | 'command';
  toolCall?: { name: string; input: unknown };
}

type PreparedCommand = Awaited<ReturnType<typeof prepareCommand>>;

/** What every trial runs: a workspace script, or a command (with the .py file it names). */
interface SweepSource {
  prepared: PreparedCommand | undefined;
  /** The script's real path, when the sweep names a script. */
  real: string | undefined;
  script: string;
  launch: { command: string[]; cwd: string; scriptPath?: string } | undefined;
}

/** A command is checked and resolved like `run -- …` (working directory, the .py file it names). */
async function resolveSource(context: SweepContext, spec: SweepSpec): Promise<SweepSource> {
  const prepared =
    spec.command === undefined ? undefined : await prepareCommand(context.workspace, spec.command, undefined);
  const real =
    spec.script === undefined ? undefined : await resolveWorkspaceScript(context.workspace, spec.script);
  const script = real === undefined ? (prepared?.script ?? '') : await readFile(real, 'utf8');
  const launch =
    prepared === undefined
      ? undefined
      : {
          command: prepared.argv,
          cwd: prepared.cwd,
          ...definedOnly({ scriptPath: prepared.scriptPath }),
        };
  if (script.trim() !== '') {
    const syntaxError = await context.checkSyntax?.(script);
    if (syntaxError !== undefined)
      throw new ToolPolicyError(
        'script_syntax_error',
        `${spec.script ?? 'the script'}: ${syntaxError}\nNo approval card was posted.`,
      );
  }
  return { prepared, real, script, launch };
}

async function sweepName(context: SweepContext, spec: SweepSpec, source: SweepSource): Promise<string> {
  const base =
    source.real === undefined
      ? (source.prepared?.suggestedName ?? 'command')
      : basename(source.real).replace(/\.py$/, '');
  const name = spec.name ?? `${base.replace(/_/g, '-')}-sweep`;
  if ((await context.store.find(name)) !== undefined)
    throw new RunError('name_taken', `a sweep named ${name} already exists; pick another --name`);
  return name;
}

/** One run per grid point, each waiting for the sweep's single card. */
async function createTrialRuns(
  context: SweepContext,
  request: SweepRequest,
  name: string,
  source: SweepSource,
  limits: { values: Array<Record<string, GridValue>>; gpus: number; maxHours: number },
): Promise<{ trials: Trial[]; costUsd: number; placement?: string }> {
  const trials: Trial[] = [];
  const { spec } = request;
  const placementFields = definedOnly({
    image: spec.image,
    flavor: spec.flavor,
    evalCommand: spec.evalCommand,
  });
  let costUsd = 0;
  let placement: string | undefined;
  for (const [index, trialValues] of limits.values.entries()) {
    const meta = await context.runs.createRun({
      name: `${name}-${index + 1}`,
      script: source.script,
      gpus: limits.gpus,
      maxHours: limits.maxHours,
      threadId: request.threadId,
      requester: request.actor,
      config: { ...trialValues, sweep: name, trial: index + 1 },
      args: trialArgs(trialValues),
      ...definedOnly({ backend: spec.on }),
      ...(source.launch === undefined && Object.keys(placementFields).length === 0
        ? {}
        : { launch: { ...source.launch, ...placementFields } }),
    });
    // Each trial is priced by its backend (an HF flavour's hourly price, a per-backend GPU-hour price).
    costUsd += estimateRunCostUsd(meta, context.gpuHourUsd);
    placement ??= meta.placement;
    trials.push({ index, name: meta.name, values: trialValues, runId: meta.id, state: 'waiting' });
  }
  return { trials, costUsd: Math.round(costUsd * 100) / 100, ...definedOnly({ placement }) };
}

function cardSummary(source: SweepSource, sweep: Sweep): string {
  const { prepared } = source;
  return [
    ...(prepared === undefined
      ? []
      : [`Command: \`${redactSecrets(formatCommand(prepared.argv))} --key value…\` in ${prepared.cwd}`]),
    `${sweep.trials.length} trials, the first one runs alone as a canary until it logged ${sweep.canarySteps} healthy steps; ${sweep.metric} is ${sweep.mode === 'min' ? 'minimised' : 'maximised'}.`,
    ...sweep.trials.map(
      (trial) =>
        `${trial.index + 1}. ${trial.name}: ${describeValues(trial.values)}${trial.index === 0 ? ' (canary)' : ''}`,
    ),
  ].join('\n');
}

/** Creates the sweep and its trial runs, then asks for one approval for all of them. */
export async function createSweep(context: SweepContext, request: SweepRequest): Promise<string> {
  const { spec, threadId, actor } = request;
  const source = await resolveSource(context, spec);
  const values = expandGrid(spec.grid);
  if (values.length > MAX_TRIALS)
    throw new RunError('invalid_run', `that grid has ${values.length} trials; the limit is ${MAX_TRIALS}`);
  const name = await sweepName(context, spec, source);
  const gpus = spec.gpus ?? 0;
  const maxHours = checkMaxHours(spec.maxHours ?? context.defaultMaxHours, context.maxHours);
  // Refused before any trial exists when the grid's cost cannot be a number.
  estimateCostUsd(values.length * gpus, maxHours, context.gpuHourUsd);
  const { trials, costUsd, placement } = await createTrialRuns(context, request, name, source, {
    values,
    gpus,
    maxHours,
  });
  const sweep = await context.store.create(
    {
      name,
      threadId,
      requester: actor,
      script: source.real ?? formatCommand(spec.command ?? []),
      gpus,
      maxHours,
      metric: spec.metric ?? 'loss',
      mode: spec.mode ?? 'min',
      canarySteps: spec.canarySteps ?? 20,
      parallel: spec.parallel ?? 0,
      state: 'pending_approval',
      trials,
    },
    new Date(),
  );
  const { approval, autoApproved } = await context.approvals.requestSweep({
    sweepId: sweep.id,
    name,
    threadId,
    requester: actor,
    trials: trials.length,
    gpus,
    maxHours,
    costUsd,
    summary: cardSummary(source, sweep),
    scriptExcerpt: source.script,
    origin: request.origin,
    ...definedOnly({ toolCall: request.toolCall, backend: placement }),
  });
  await context.store.update(sweep.id, (current) => ({ ...current, approvalId: approval.id }));
  return autoApproved
    ? `Sweep ${name} (${trials.length} trials) was auto-approved (est. $${costUsd} in total); the canary ${trials[0]?.name} starts first.`
    : `Approval requested for sweep ${name}: ${trials.length} trials × ${gpus} GPU${gpus === 1 ? '' : 's'} × ${maxHours} h, est. $${costUsd} in total (approval ${approval.id}).`;
}
