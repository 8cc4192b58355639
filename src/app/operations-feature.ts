import type { ApprovalService } from '../approvals/approval-service.js';
import { definedOnly } from '../defined-only.js';
import { detectorConfigFrom } from '../monitor/types.js';
import { createNetworkIsolation } from '../runs/network-isolation.js';
import type { RunOperations } from '../runs/operations/operation-types.js';
import type { RunAccess } from '../runs/operations/run-access.js';
import { createRunOperations } from '../runs/operations/run-operations.js';
import { lookupRunUser } from '../runs/run-as-user.js';
import { createRunCommand } from '../runs/slurm/slurm-command.js';
import { createCheckpointLister } from '../tools/checkpoint-listing.js';
import { createDatasetChecks, type DatasetChecks } from '../tools/dataset-format.js';
import type { MemoryNotes } from '../tools/memory-tool.js';
import { createRunInspectTools } from '../tools/run-inspect-tools.js';
import { createRunTools } from '../tools/run-tools.js';
import { createScriptChecks, type ScriptChecks } from '../tools/script-checks.js';
import { createWatchOperations, WATCH_ACTIONS, type WatchOperations } from '../tools/watch-operations.js';
import type { RunsRuntime } from './create-runs.js';
import type { Feature, FeatureBase } from './feature.js';

interface OperationsFeature extends Feature {
  operations: RunOperations;
  watching: WatchOperations;
  scriptChecks: ScriptChecks;
  /** The threads' latest dataset format checks (the inspect_dataset tool records them). */
  datasetChecks: DatasetChecks;
}

interface OperationsDependencies {
  runs: RunsRuntime;
  approvals: ApprovalService;
  access: RunAccess;
  memoryNotes: MemoryNotes;
}

/** What people and the agent do to runs (run operations), watched runs and their stop cards, run tools. */
export function createOperationsFeature(
  base: FeatureBase,
  dependencies: OperationsDependencies,
): OperationsFeature {
  const { config, logger, notifier } = base;
  const { runs, access } = dependencies;
  const datasetChecks = createDatasetChecks(base.redis, base.prefix);
  const scriptChecks = scriptChecksOf(base);
  const watching = createWatchOperations({
    runs: runs.service,
    queries: runs,
    workspace: config.workspace,
    redis: base.redis,
    prefix: base.prefix,
    notifier,
    slurmCommand: createRunCommand({ ...base.runEnvironment }),
    kubernetesNamespace: config.kubernetes.namespace,
    access,
    logger: logger.child({ component: 'watch' }),
  });
  const operations = createRunOperations({
    runs: runs.service,
    schedules: runs.schedules,
    queries: runs,
    approvals: dependencies.approvals,
    access,
    workspace: config.workspace,
    environments: config.runs.environments,
    runEnvironment: base.runEnvironment,
    defaultEnvironment: config.runs.defaultEnvironment,
    confirmStop: watching.confirmStop,
    checkpoints: runs.checkpoints,
    python: config.runs.python,
    maxHours: config.runs.maxHours,
    checkSyntax: scriptChecks.checkSyntax,
    ...definedOnly({ preflight: scriptChecks.preflight }),
    notify: async (threadId, text) => {
      await notifier.post(threadId, text);
    },
    memoryEstimate: dependencies.memoryNotes.latest,
    datasetCheck: datasetChecks.latest,
  });
  return {
    operations,
    watching,
    scriptChecks,
    datasetChecks,
    hooks: { checkSyntax: scriptChecks.checkSyntax },
    actions: Object.values(WATCH_ACTIONS).map((verb) => ({
      verb,
      handler: (action, token) => watching.onAction(action, verb, token),
    })),
    controlHandlers: {},
    tools: [
      ...createRunTools(operations),
      ...createRunInspectTools({
        runs,
        operations,
        checkpoints: createCheckpointLister({
          runs,
          history: runs.checkpoints,
          detectors: detectorConfigFrom(config.monitor),
        }),
      }),
    ],
    workers: [],
  };
}

/** Check before spending: every script is compiled before its card, optionally run briefly on CPU. */
function scriptChecksOf(base: FeatureBase) {
  const { config, logger } = base;
  const botUid = process.getuid?.();
  const runAs = config.runs.runAsUser === undefined ? undefined : lookupRunUser(config.runs.runAsUser);
  if (config.checks.preflightSteps > 0 && botUid === 0 && runAs === undefined) {
    logger.warn(
      'SHEPHERD_PREFLIGHT_STEPS is set but the bot runs as root without SHEPHERD_RUN_AS_USER: pre-flights are refused (cards say so)',
    );
  }
  return createScriptChecks({
    python: config.runs.python,
    environment: base.runEnvironment,
    preflightSteps: config.checks.preflightSteps,
    preflightTimeoutS: config.checks.preflightTimeoutS,
    runAs,
    botUid,
    isolation: createNetworkIsolation({ botUid }),
  });
}
