import { z } from 'zod';
import type { RunsRuntime } from '../create-runs.js';
import { definedOnly } from '../defined-only.js';
import { HubPushError } from '../errors.js';
import { PUSH_ACTIONS } from '../hub/hub-push-card.js';
import { createHubPushService } from '../hub/hub-push-service.js';
import { createModelReady, type ModelReady } from '../hub/model-ready.js';
import { MODEL_ACTIONS } from '../hub/model-ready-card.js';
import { parsePushCommand } from '../hub/push-command.js';
import { defineTool } from '../tools/registry.js';
import { runReference } from '../tools/run-reference.js';
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

/** The model-ready card, Push to Hub (card, command, tool) and its approval. */
export function createHubFeature(base: FeatureBase, dependencies: { runs: RunsRuntime }): HubFeature {
  const { config, logger, redis, prefix, notifier } = base;
  const { runs } = dependencies;
  let modelReady: ModelReady | undefined;
  const pushes = createHubPushService({
    redis,
    prefix,
    notifier,
    controlQueue: base.controlQueue,
    runs,
    recordHubPush: (runId, push) => runs.service.recordHubPush(runId, push),
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
    pushes,
    gpuHourUsd: config.runs.gpuHourUsd,
    quickchartUrl: config.monitor.quickchartUrl,
    logger: logger.child({ component: 'model-ready' }),
  });
  modelReady = ready;
  return {
    modelReady: ready,
    actions: [
      ...Object.entries(MODEL_ACTIONS).map(([verb, id]) => ({
        verb: id,
        handler: (action: Parameters<ModelReady['onAction']>[0], runId: string) =>
          ready.onAction(action, verb as keyof typeof MODEL_ACTIONS, runId),
      })),
      ...Object.entries(PUSH_ACTIONS).map(([verb, id]) => ({
        verb: id,
        handler: (action: Parameters<ModelReady['onAction']>[0], pushId: string) =>
          pushes.onAction(action, verb as keyof typeof PUSH_ACTIONS, pushId),
      })),
    ],
    controlHandlers: { 'hub-push': (job) => pushes.apply(job) },
    tools: [
      defineTool({
        name: 'push_to_hub',
        description:
          "Ask to publish a completed run's saved model (shepherd.save_model) to the Hugging Face Hub with a generated model card. An approver must approve the card first; the URL is posted when the upload is done.",
        kind: 'write',
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
