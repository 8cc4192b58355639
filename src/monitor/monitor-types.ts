import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import type { ProcessState } from '../runs/executor.js';
import type { RunMeta } from '../runs/records/run-types.js';
import type { TrackerLinks } from '../runs/tracker-links.js';
import type { GpuProbe } from './gpu-probe.js';
import type { WakeResult } from './monitor-holds.js';
import type { MonitorState } from './monitor-state.js';
import type { AlertPolicy } from './policy-checks.js';
import type { RollingLimits } from './rolling-stats.js';
import type { TriageSnapshot } from './triage-snapshot.js';
import type { DetectorConfig, Incident } from './types.js';
import type { WokenFiles } from './woken-files.js';

/** The monitor's options and interface (monitor.ts builds it), apart so its users need not import the shell. */

export interface MonitorOptions {
  redis: Redis;
  prefix: string;
  /** Absolute run directory for a run (holds metrics.jsonl and output.log). */
  runDir: (meta: RunMeta) => string;
  detectors?: Partial<DetectorConfig>;
  limits?: Partial<RollingLimits>;
  /** Byte cap per file per tick; the rest is read on the next tick. */
  maxBytesPerTick?: number;
  clock?: () => number;
  logger?: Logger;
  /** SHEPHERD_METRIC_PATTERN, compiled: tried first on output.log lines. */
  metricPattern?: RegExp;
  /** People's rules and mutes of a run (alert-policy.ts); absent = none. */
  policy?: { load(runId: string): Promise<AlertPolicy> };
  /** GPU utilisation probe (nvidia-smi) for the idle-GPU detector; absent = detector off. */
  gpuProbe?: GpuProbe;
  /** Hang dumps: asks a stalled run for its stacks (into output.log); how, or undefined when it cannot. */
  dumpStacks?: (meta: RunMeta) => Promise<string | undefined>;
  /** Look for tracker links (W&B, MLflow…) in output.log (SHEPHERD_TRACKER_LINKS; default on). */
  trackerLinks?: boolean;
  /** MLFLOW_TRACKING_URI as a run's environment sets it (a `file:` store is read too); absent = unset. */
  mlflowTrackingUri?: (meta: RunMeta) => string | undefined;
}

export interface TickResult {
  /** Incidents to deliver: new ones plus any not yet acknowledged with `ack` (at-least-once). */
  incidents: Incident[];
  newPoints: number;
  malformed: { count: number; note?: string };
  progress: { lastStep?: number; points: number; lastMetrics: Record<string, number> };
  /** More data than the per-tick cap was waiting; the rest is read next tick. */
  backlog: boolean;
  /** The tick was skipped because another tick of the same run held the lock. */
  skipped?: boolean;
  /** The run's tracker links, when this tick found new ones (for its started card). */
  links?: TrackerLinks;
}

export interface Monitor {
  /**
   * One monitor tick for a run. Returns the incidents to deliver; call `ack` with their ids once posted.
   * Concurrent ticks of the same run are serialised by a Redis lease (the loser is skipped).
   */
  tick(runId: string, meta: RunMeta, processState: ProcessState): Promise<TickResult>;
  /**
   * A woken evaluation (the run's files grew): the new points on the state this process holds for the run
   * (monitor-holds.ts), with no executor poll and no time-based detectors; the timer's tick does those.
   */
  wake(runId: string, meta: RunMeta, files?: WokenFiles): Promise<WakeResult>;
  /** Commit and let go of every run held for wake-ups (before the process closes Redis). */
  endHolds(): Promise<void>;
  /** Mark incidents as delivered so later ticks stop returning them. */
  ack(runId: string, incidentIds: string[]): Promise<void>;
  /** Chart series (downsampled history + recent window) for the given metrics, or all tracked ones. */
  series(runId: string, metrics?: string[]): Promise<Record<string, Array<{ step: number; value: number }>>>;
  /** A compact, bounded snapshot for LLM triage (never called by the monitor itself). */
  snapshot(input: {
    meta: RunMeta;
    processState: ProcessState;
    script?: string;
    incident?: Incident;
  }): Promise<TriageSnapshot>;
  /** The raw persisted state (tests, debugging). */
  loadState(runId: string): Promise<MonitorState>;
  /** Delete everything the monitor keeps for a run (after it ended and its last tick ran). */
  forget(runId: string): Promise<void>;
  /**
   * A run that may come back (paused, or failed and open to a fix) keeps its state for `keepMs` after its
   * last tick, for triage and for a resume that goes on from its cursors; a later tick keeps it again.
   */
  retire(runId: string, keepMs: number): Promise<void>;
}

/** Where the run watcher hands each incident (the alert service); true when this call recorded the alert. */
export interface IncidentSink {
  onIncident(incident: Incident, meta: RunMeta): Promise<boolean>;
}
