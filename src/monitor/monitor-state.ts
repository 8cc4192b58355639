import { z } from 'zod';
import type { MalformedBook } from '../runs/metric-line.js';
import type { StdoutParseState } from '../runs/stdout-metrics/stdout-parser.js';
import type { EventCursors } from '../runs/tfevents/event-files.js';
import type { MlflowCursors } from '../runs/tfevents/mlflow-store.js';
import type { TrackerLinks } from '../runs/tracker-links.js';
import type { ScriptAlertBook } from './detectors/script-alert.js';
import type { EpisodeBook } from './episodes.js';
import { decodeRollingState, serialiseRollingState, withField } from './rolling-state-text.js';
import { createRollingState, type RollingState } from './rolling-stats.js';
import type { ExtrasState } from './tick-extras.js';

/** The per-run state persisted in `<prefix>:monitor:<runId>` (field `state`), next to the file cursors. */
/** Where the printed-metrics reader (printed-metrics.ts) is in the run's sources. */
interface PrintedMetricsState extends StdoutParseState {
  /** metrics.jsonl has content: the helper is the source. */
  helper: boolean;
  /** Points from output.log fed to the rolling state so far. */
  counted: number;
  /** Committed size of stdout-metrics.jsonl. */
  derivedBytes: number;
  /** Event files (TensorBoard, MLflow's file store) gave points: they are the source, not output.log. */
  events?: boolean;
}

export interface MonitorState {
  v: 1;
  rolling: RollingState;
  episodes: EpisodeBook;
  malformed: MalformedBook;
  /** Last few KiB of output.log, redacted lazily when quoted. */
  logTail: string;
  /** Monitor clock (ms) of the first tick, the stall reference before any step. */
  firstTickAt?: number;
  ticks: number;
  /** Metrics read from output.log (runs without the helper); see printed-metrics.ts. */
  printed?: PrintedMetricsState;
  /** State of the grad-norm, throughput, overfitting and idle-GPU detectors and of people's rules. */
  extras?: ExtrasState;
  /** A hang dump asked for by the stall detector (observe-stall.ts); dropped when a step moves. */
  stallDump?: { askedAt: number; how?: string; log: string };
  /** Launch whose metrics were read last; a newer launch re-arms the detectors. */
  launch?: number;
  /** `shepherd.alert` titles and when each was last posted (detectors/script-alert.ts). */
  scriptAlerts?: ScriptAlertBook;
  /** Links to the run in its trackers, found in output.log (runs/tracker-links.ts). */
  links?: TrackerLinks;
  /** Cursors of the run's TensorBoard event files (runs/tfevents/event-files.ts). */
  tfevents?: EventCursors;
  /** Cursors of the metric files of the run's MLflow file store (runs/tfevents/mlflow-store.ts). */
  mlflow?: MlflowCursors;
}

export const LOG_TAIL_CHARS = 8 * 1024;

export function createMonitorState(): MonitorState {
  return {
    v: 1,
    rolling: createRollingState(),
    episodes: {},
    malformed: { count: 0, reported: false },
    logTail: '',
    ticks: 0,
  };
}

// A shallow shape check: the state is ours, but a stale or foreign value must not crash the monitor.
const stateShape = z.object({
  v: z.literal(1),
  rolling: z.object({ v: z.literal(1), metrics: z.record(z.string(), z.unknown()) }).loose(),
  episodes: z.record(z.string(), z.object({ active: z.boolean(), calm: z.number(), fired: z.number() })),
  malformed: z.object({ count: z.number(), reported: z.boolean() }),
  logTail: z.string(),
  ticks: z.number(),
});

export function parseMonitorState(raw: string | null | undefined): MonitorState {
  if (raw === null || raw === undefined) return createMonitorState();
  try {
    const value: unknown = JSON.parse(raw);
    if (stateShape.safeParse(value).success) {
      const state = value as MonitorState;
      decodeRollingState(state.rolling);
      return state;
    }
  } catch {
    // fall through to a fresh state
  }
  return createMonitorState();
}

export function serialiseMonitorState(state: MonitorState): string {
  const { rolling, ...rest } = state;
  return withField(JSON.stringify(rest), 'rolling', serialiseRollingState(rolling));
}
