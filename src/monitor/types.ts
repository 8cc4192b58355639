import type { Config } from '../config.js';
import type { ExecutorCrashClass } from '../runs/executor.js';

/** Kinds of alert the monitor raises. */
export type IncidentKind = 'crash' | 'nan' | 'spike' | 'divergence' | 'plateau' | 'stall' | 'finished';

export type IncidentSeverity = 'info' | 'warning' | 'critical';

/** Why a run crashed: from its traceback and exit, or from the executor's verdict (Slurm). */
export type CrashClass =
  | 'cuda_oom'
  | 'host_oom_kill'
  | 'nccl_timeout'
  | 'missing_module'
  | 'syntax_error'
  | 'file_not_found'
  | ExecutorCrashClass
  | 'other';

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
  crashClass?: CrashClass;
  exitCode?: number;
  signal?: string;
  /** Launch of the run the incident belongs to (a fix relaunches; detectors re-arm per launch). */
  launch?: number;
  /** Epoch ms when it was raised. */
  at: number;
}

/** Thresholds of the detectors (`config.monitor` carries them; see docs/monitoring.md). */
export interface DetectorConfig {
  stallS: number;
  spikeWindow: number;
  spikeMadK: number;
  spikeMinRatio: number;
  divergenceWindow: number;
  divergenceMinRise: number;
  plateauWindow: number;
  plateauMinImprovement: number;
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
  nanRecoveryPoints: 5,
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
  };
}
