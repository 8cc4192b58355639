import type { ProcessState } from '../runs/executor.js';
import type { RunMeta } from '../runs/run-types.js';
import type { TrackerLinks } from '../runs/tracker-links.js';
import type { MonitorState } from './monitor-state.js';
import type { TriageSnapshot } from './triage-snapshot.js';
import type { Incident } from './types.js';

/**
 * The monitor as the rest of the app sees it (monitor.ts implements it), and where its incidents go. Kept
 * apart from the shell so the alerts (alerts/) can name both without importing monitor.ts.
 */

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
