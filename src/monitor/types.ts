import type { Config } from '../config/config.js';
import type { TrackerLinks } from '../runs/tracker-links.js';
import type { CrashClass } from './detectors/crash.js';
import type { GradNormSettings } from './detectors/grad-norm.js';
import type { IdleGpuSettings } from './detectors/idle-gpu.js';
import type { DivergenceSettings, SpikeSettings } from './detectors/loss-detectors.js';
import type { OverfitSettings } from './detectors/overfitting.js';
import type { PlateauSettings } from './detectors/plateau.js';
import type { ThroughputSettings } from './detectors/throughput.js';

/** Kinds of alert the monitor raises. */
export type IncidentKind =
  | 'crash'
  | 'nan'
  | 'spike'
  | 'divergence'
  | 'plateau'
  | 'stall'
  | 'finished'
  | 'overfitting'
  | 'throughput'
  | 'grad_norm'
  | 'idle_gpu'
  | 'rule'
  /** The run's `--eval` command failed after training completed (reported like a crash). */
  | 'eval_failed'
  /** `shepherd.alert(…)` from the script itself. */
  | 'script_alert';

export type IncidentSeverity = 'info' | 'warning' | 'critical';

/** One alert, raised once per episode. `id` is stable so a retried delivery can be de-duplicated. */
export interface Incident {
  id: string;
  runId: string;
  kind: IncidentKind;
  severity: IncidentSeverity;
  title: string;
  /** Human text for the thread. */
  summary: string;
  /** Metric names to chart. */
  metrics: string[];
  step?: number;
  /** Steps to highlight on the chart. */
  highlightSteps?: [number, number];
  traceback?: string;
  /** A stall's hang dump: every thread's stack (for triage). */
  stackDump?: string;
  crashClass?: CrashClass;
  exitCode?: number;
  signal?: string;
  /** An infrastructure failure after the automatic relaunches ran out: one line per retry (no triage). */
  retries?: string[];
  /** Links to the run in its trackers (W&B, MLflow…), shown on the card. */
  links?: TrackerLinks;
  /** Launch of the run the incident belongs to (a fix relaunches; detectors re-arm per launch). */
  launch?: number;
  /** Epoch ms when it was raised. */
  at: number;
}

/** Thresholds of the detectors (`config.monitor` carries them; see docs/monitoring.md). */
export interface DetectorConfig
  extends PlateauSettings,
    GradNormSettings,
    ThroughputSettings,
    OverfitSettings,
    IdleGpuSettings,
    SpikeSettings,
    DivergenceSettings {
  stallS: number;
  /** Plateau notes per run (default 1). */
  plateauMaxAlerts: number;
  /** Consecutive all-finite points that end a NaN episode. */
  nanRecoveryPoints: number;
}

export const DEFAULT_DETECTOR_CONFIG: DetectorConfig = {
  stallS: 300,
  spikeWindow: 50,
  spikeMadK: 10,
  spikeMinRatio: 3,
  divergenceWindow: 30,
  divergenceMinRise: 0.5,
  plateauWindow: 200,
  plateauMinImprovement: 0.01,
  plateauShare: 0.25,
  plateauEndShare: 0.15,
  plateauConfidenceZ: 2.576,
  plateauMaxAlerts: 1,
  nanRecoveryPoints: 5,
  gradNormWindow: 100,
  gradNormMadK: 10,
  gradNormMinRatio: 4,
  gradNormPoints: 3,
  throughputDropRatio: 0.5,
  throughputTicks: 3,
  throughputMinHistory: 8,
  overfitEvals: 3,
  overfitMinRise: 0.02,
  idleGpuMin: 15,
  idleGpuUtilPercent: 10,
};

/** Detector thresholds from the parsed configuration (`config.monitor`). */
export function detectorConfigFrom(monitor: Config['monitor']): DetectorConfig {
  return {
    ...DEFAULT_DETECTOR_CONFIG,
    stallS: monitor.stallS,
    spikeWindow: monitor.spikeWindow,
    spikeMadK: monitor.spikeMadK,
    spikeMinRatio: monitor.spikeMinRatio,
    divergenceWindow: monitor.divergenceWindow,
    divergenceMinRise: monitor.divergenceMinRise,
    plateauWindow: monitor.plateauWindow,
    plateauMinImprovement: monitor.plateauMinImprovement,
    plateauMaxAlerts: monitor.plateauMaxAlerts,
    idleGpuMin: monitor.idleGpuMin,
  };
}
