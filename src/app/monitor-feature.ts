import { createMetricsCharts } from '../charts/metrics-chart.js';
import { compileMetricPattern } from '../config/metric-pattern.js';
import { definedOnly } from '../defined-only.js';
import { ALERT_ACTIONS } from '../monitor/alerts/alert-card.js';
import { type AlertPolicyStore, createAlertPolicyStore } from '../monitor/alerts/alert-policy.js';
import {
  type AlertRuleOperations,
  createAlertRuleOperations,
} from '../monitor/alerts/alert-rule-operations.js';
import { type AlertService, createAlertService } from '../monitor/alerts/alert-service.js';
import { createNvidiaSmiProbe } from '../monitor/gpu-probe.js';
import { createMonitor } from '../monitor/monitor.js';
import { detectorConfigFrom, type Incident } from '../monitor/types.js';
import { createRunWatcher } from '../monitor/watch-runs.js';
import type { RunOperations } from '../runs/operations/operation-types.js';
import type { RunAccess } from '../runs/operations/run-access.js';
import type { RunFollows } from '../runs/operations/run-follows.js';
import type { RunMeta } from '../runs/records/run-types.js';
import type { TrackerLinks } from '../runs/tracker-links.js';
import { createAlertTools } from '../tools/alert-tools.js';
import { createShowMetricsTool } from '../tools/chart-tool.js';
import type { RunsRuntime } from './create-runs.js';
import type { Feature, FeatureBase } from './feature.js';

interface MonitorFeature extends Feature {
  alerts: AlertService;
  postChart: ReturnType<typeof createMetricsCharts>;
  alertRules: AlertRuleOperations;
}

interface MonitorFeatureDependencies {
  runs: RunsRuntime;
  operations: RunOperations;
  access: RunAccess;
  follows: RunFollows;
  /** Takes an incident that is not a card's (a sweep trial's); true when it did. */
  claimIncident(incident: Incident, meta: RunMeta): Promise<boolean>;
  /** Called once per alert posted, with the detector's kind (metrics). */
  onAlert?: (kind: string) => void;
  /** The monitor found a run's first tracker links (its started card shows them). */
  onTrackerLinks?: (runId: string, links: TrackerLinks) => Promise<void>;
  /** Takes the finish of a run that saved a model (the model-ready card); true when it did. */
  modelReady?: { onFinished(incident: Incident, meta: RunMeta): Promise<boolean> };
}

/** Detectors on every running run, alert cards and their buttons, triage, charts, alert rules. */
export function createMonitorFeature(
  base: FeatureBase,
  dependencies: MonitorFeatureDependencies,
): MonitorFeature {
  const { config, logger, redis, prefix, notifier } = base;
  const { runs } = dependencies;
  const postChart = createMetricsCharts({
    queries: runs,
    notifier,
    quickchartUrl: config.monitor.quickchartUrl,
  });
  // People's alert rules and mutes, kept in Redis with the run (alert-policy.ts).
  const alertPolicy = createAlertPolicyStore({ redis, prefix });
  const alertRules = createAlertRuleOperations({
    store: alertPolicy,
    findRun: (reference) => runs.find(reference),
  });
  const monitor = createRunMonitor(base, runs, alertPolicy);
  const alerts = createAlertService({
    redis,
    prefix,
    monitor,
    runs: runs.service,
    queries: runs,
    operations: dependencies.operations,
    notifier,
    provider: base.provider,
    controlQueue: base.controlQueue,
    quickchartUrl: config.monitor.quickchartUrl,
    maxAutofix: config.monitor.maxAutofix,
    python: config.runs.python,
    environment: base.runEnvironment,
    access: dependencies.access,
    onAlert: (meta, incident) => dependencies.follows.onIncident(meta, incident),
    checkpoints: runs.checkpoints,
    logger: logger.child({ component: 'alerts' }),
  });
  const countedAlerts: AlertService = {
    ...alerts,
    async onIncident(incident, meta) {
      // Incidents of sweep trials end in one line in the sweep's thread: no card, no triage.
      if (await dependencies.claimIncident(incident, meta)) return false;
      // A run that saved a model gets the model-ready card instead of the finished note.
      if (await dependencies.modelReady?.onFinished(incident, meta)) return true;
      // Counted when the alert is recorded, not per delivery: a re-delivered incident returns false.
      const recorded = await alerts.onIncident(incident, meta);
      if (recorded) dependencies.onAlert?.(incident.kind);
      return recorded;
    },
  };
  const watcher = createRunWatcher({
    config,
    redis,
    prefix,
    monitor,
    runs,
    alerts: countedAlerts,
    notifier,
    postChart,
    onRetired: (runId, keepMs) => alertPolicy.retire(runId, keepMs),
    ...definedOnly({ onTrackerLinks: dependencies.onTrackerLinks }),
    logger,
  });
  return {
    alerts,
    hooks: {
      async onRunEvent(event) {
        if (event.type !== 'run-started') return;
        // A resumed run's rules and mutes are its own again for as long as it is watched.
        await alertPolicy.keep(event.meta.id);
        await watcher.watch(event.meta.id);
      },
    },
    postChart,
    alertRules,
    actions: Object.values(ALERT_ACTIONS).map((verb) => ({
      verb,
      handler: (action, id) => alerts.onAction(action, verb, id),
    })),
    controlHandlers: { 'alert-action': (job) => alerts.apply(job) },
    tools: [createShowMetricsTool(postChart), ...createAlertTools(alertRules)],
    workers: [
      async () => {
        await watcher.sync(await runs.list());
        return [watcher.createWorker()];
      },
    ],
    close: () => watcher.close(),
  };
}

/** The tick engine: detectors from config, the run's files through `RunQueries`, people's mutes. */
function createRunMonitor(base: FeatureBase, runs: RunsRuntime, policy: AlertPolicyStore) {
  const { config } = base;
  const pattern = config.monitor.metricPattern;
  return createMonitor({
    redis: base.redis,
    prefix: base.prefix,
    runDir: (meta) => runs.runDirectory(meta.id),
    detectors: detectorConfigFrom(config.monitor),
    logger: base.logger.child({ component: 'monitor' }),
    ...definedOnly({ metricPattern: pattern === undefined ? undefined : compileMetricPattern(pattern) }),
    policy,
    trackerLinks: config.monitor.trackerLinks,
    // A named environment's `env` wins over what every run inherits, as at launch.
    mlflowTrackingUri: (meta) =>
      (meta.environmentName === undefined
        ? undefined
        : config.runs.environments[meta.environmentName]?.env?.MLFLOW_TRACKING_URI) ??
      base.runEnvironment.MLFLOW_TRACKING_URI,
    gpuProbe: createNvidiaSmiProbe({ command: config.monitor.nvidiaSmi, environment: base.runEnvironment }),
    dumpStacks: (meta) => runs.dumpStacks(meta),
  });
}
