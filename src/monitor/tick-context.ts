import type { RunMeta } from '../runs/records/run-types.js';
import type { EventPoint } from '../runs/tfevents/event-files.js';
import type { AlertPolicy } from './policy-checks.js';
import type { createPrintedMetricsReader } from './printed-metrics.js';
import type { RollingLimits } from './rolling-stats.js';
import type { DetectorConfig } from './types.js';

/** What one evaluation is given besides the new lines: the run, its settings and what the shell read. */
export interface TickContext {
  meta: RunMeta;
  /** The run's id as the tick was asked for (defaults to `meta.id`). */
  runId?: string;
  detectors: DetectorConfig;
  limits: RollingLimits;
  printedMetrics: ReturnType<typeof createPrintedMetricsReader>;
  /** People's rules and mutes of the run; absent = none. */
  policy?: AlertPolicy | undefined;
  /** GPU utilisation the shell probed this tick; absent = the idle-GPU detector is off. */
  gpu?: { utilisation: number[] | undefined } | undefined;
  /** The last bytes of output.log, read by the shell when `needsCrashLog` said so. */
  crashLogTail?: string | undefined;
  /** New lines of the run's alerts.jsonl (`shepherd.alert`). */
  scriptAlertLines?: readonly string[] | undefined;
  /** Look for tracker links in the new output.log lines (SHEPHERD_TRACKER_LINKS). */
  trackerLinks?: boolean;
  /**
   * A woken evaluation (a file grew): it judges the new points only. What depends on time or on the window
   * as a whole (stall, throughput, idle GPUs, rules at a time, plateau) waits for the timer's tick.
   */
  woken?: boolean;
  /** Points new in the run's TensorBoard event files (the shell reads them). */
  eventPoints?: readonly EventPoint[] | undefined;
}
