import { z } from 'zod';
import { definedOnly } from '../defined-only.js';
import { HubPushError } from '../errors.js';
import { PUSH_ACTIONS } from '../hub/hub-push-card.js';
import { createHubPushService } from '../hub/hub-push-service.js';
import { createModelActions, type ModelActionVerb } from '../hub/model-actions.js';
import { createModelReady, type ModelReady } from '../hub/model-ready.js';
import { MODEL_ACTIONS } from '../hub/model-ready-card.js';
import { parsePushCommand } from '../hub/push-command.js';
import type { ActionHandler } from '../queue/chat-intake.js';
import type { RunOperations } from '../runs/operations/operation-types.js';
import type { RunAccess } from '../runs/operations/run-access.js';
import type { CompareRuns } from '../sweeps/compare-runs.js';
import { defineTool } from '../tools/registry.js';
import { runReference } from '../tools/run-reference.js';
import type { RunsRuntime } from './create-runs.js';
import type { Feature, FeatureBase } from './feature.js';

interface HubFeature extends Feature {
  modelReady: ModelReady;
}

const pushInput = z.object({
  run: runReference('Run name or id of a completed run that saved a model'),
  repo: z
    .string()
    .max(200)
    .optional()
    .describe('Repo id namespace/name; default SHEPHERD_HF_NAMESPACE/<run name>'),
  public: z.boolean().optional().describe('Make the repo public (default private)'),
});

/** The model-ready card and its buttons (Push to Hub with its approval, Fork, Compare), `push` and its tool. */
export function createHubFeature(
  base: FeatureBase,
  dependencies: { runs: RunsRuntime; operations: RunOperations; compare: CompareRuns; access: RunAccess },
): HubFeature {
  const { config, logger, redis, prefix, notifier } = base;
  const { runs, access } = dependencies;
  let modelReady: ModelReady | undefined;
  const pushes = createHubPushService({
    redis,
    prefix,
    notifier,
    controlQueue: base.controlQueue,
    runs,
    recordHubPush: (runId, push) => runs.service.recordHubPush(runId, push),
    settleLaunchRecords: runs.settleLaunchRecords,
    summarise: async (meta) => {
      if (modelReady === undefined) throw new Error('the model summaries are not ready');
      return modelReady.summarise(meta);
    },
    approvers: config.approvals.approvers,
    selfApproval: config.approvals.selfApproval,
    hub: { url: config.hub.url, token: config.hub.token, namespace: config.hfJobs.namespace },
    logger: logger.child({ component: 'hub-push' }),
  });
  const ready = createModelReady({
    prefix,
    notifier,
    runs,
    checkpointSteps: async (runId) => (await runs.checkpoints.list(runId)).map((entry) => entry.step),
    healthyCheckpointSteps: async (runId) =>
      (await runs.checkpoints.list(runId))
        .filter((entry) => entry.health !== 'bad' && (entry.intact !== false || entry.pinned !== undefined))
        .map((entry) => entry.step),
    pushes,
    gpuHourUsd: config.runs.gpuHourUsd,
    quickchartUrl: config.monitor.quickchartUrl,
    logger: logger.child({ component: 'model-ready' }),
  });
  modelReady = ready;
  const modelActions = createModelActions({
    runs,
    notifier,
    controlQueue: base.controlQueue,
    mayAct: access.mayChange,
    refusal: (meta, actor, threadId, verb) => access.refusal(meta, actor, threadId, verb, 'button'),
    bestHealthyStep: ready.bestHealthyStep,
    summarise: ready.summarise,
    fork: dependencies.operations.fork,
    compare: dependencies.compare,
  });
  const modelButton = (verb: ModelActionVerb) => ({
    verb: MODEL_ACTIONS[verb],
    handler: ((action, runId) => modelActions.onClick(action, verb, runId)) satisfies ActionHandler,
    form: (action: Parameters<ActionHandler>[0], runId: string) => modelActions.form(action, verb, runId),
  });
  return {
    modelReady: ready,
    actions: [
      { verb: MODEL_ACTIONS.push, handler: (action, runId) => ready.onPush(action, runId) },
      modelButton('fork'),
      modelButton('compare'),
      ...Object.entries(PUSH_ACTIONS).map(([verb, id]) => ({
        verb: id,
        handler: ((action, pushId) =>
          pushes.onAction(action, verb as keyof typeof PUSH_ACTIONS, pushId)) satisfies ActionHandler,
      })),
    ],
    controlHandlers: {
      'hub-push': (job) => pushes.apply(job),
      'model-action': (job) => modelActions.apply(job),
    },
    tools: [
      defineTool({
        name: 'push_to_hub',
        description:
          "Ask to publish a completed run's saved model (shepherd.save_model) to the Hugging Face Hub with a generated model card. An approver must approve the card first; the URL is posted when the upload is done.",
        input: pushInput,
        execute: (input, context) =>
          pushes.request(
            input.run,
            context.actor,
            context.threadId,
            definedOnly({ repo: input.repo, public: input.public }),
          ),
      }),
    ],
    workers: [],
    commands: async (threadId, text, actor) => {
      const command = parsePushCommand(text, config.botName);
      if (command === undefined) return undefined;
      if (command.kind === 'invalid') return `\`push\`: ${command.error}`;
      try {
        return await pushes.request(
          command.run,
          actor,
          threadId,
          definedOnly({ repo: command.repo, public: command.public }),
        );
      } catch (error) {
        if (error instanceof HubPushError) return error.message;
        throw error;
      }
    },
  };
}
