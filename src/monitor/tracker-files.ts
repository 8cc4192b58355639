import { realpath } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../logger.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { type EventPoint, readEventPoints } from '../runs/tfevents/event-files.js';
import { mlflowStoreOf, readMlflowPoints } from '../runs/tfevents/mlflow-store.js';
import type { MonitorState } from './monitor-state.js';

/**
 * The files trackers write, read each tick from cursors kept in the monitor state (committed with it):
 * TensorBoard event files under the run directory (or its `--logdir`), and MLflow's file store (`mlruns/` under the run
 * directory, under a command run's working directory, or at a `file:` MLFLOW_TRACKING_URI). Both are
 * "event files" for precedence: not read once the helper's metrics.jsonl is the source (it wins).
 */

interface TrackerFilesInput {
  runId: string;
  meta: RunMeta;
  runDir: string;
  state: MonitorState;
  maxBytes: number;
  /** MLFLOW_TRACKING_URI as the run's environment sets it, if it does. */
  mlflowTrackingUri?: string | undefined;
  logger?: Logger | undefined;
}

/** The `mlruns/` directories a run may write to, without repeats. */
function mlflowStores(input: TrackerFilesInput): string[] {
  const cwd = input.meta.cwd ?? input.runDir;
  const stores = [path.join(input.runDir, 'mlruns'), path.join(cwd, 'mlruns')];
  const configured = mlflowStoreOf(input.mlflowTrackingUri, cwd);
  if (configured !== undefined) stores.push(configured);
  return [...new Set(stores)];
}

/**
 * Where the event files are: the run's `--logdir` (checked inside the workspace at launch) while it still
 * resolves to itself (a directory later swapped for a symlink is not followed), else the run directory.
 */
async function eventRoot(input: TrackerFilesInput): Promise<string | undefined> {
  const logDir = input.meta.logDir;
  if (logDir === undefined) return input.runDir;
  const real = await realpath(logDir).catch(() => logDir);
  return real === logDir ? logDir : undefined;
}

/** One point per step in step order; the TensorBoard point's values come first when both have a step. */
function mergeByStep(first: EventPoint[], second: EventPoint[]): EventPoint[] {
  if (second.length === 0) return first;
  if (first.length === 0) return second;
  const byStep = new Map<number, EventPoint>();
  for (const point of [...first, ...second]) {
    const known = byStep.get(point.step);
    if (known === undefined) byStep.set(point.step, { ...point, metrics: { ...point.metrics } });
    else Object.assign(known.metrics, point.metrics);
  }
  return [...byStep.values()].sort((a, b) => a.step - b.step);
}

export async function readTrackerFiles(
  input: TrackerFilesInput,
): Promise<{ points: EventPoint[]; more: boolean }> {
  const { state } = input;
  if (state.printed?.helper === true) return { points: [], more: false };
  state.tfevents ??= {};
  const root = await eventRoot(input);
  const events =
    root === undefined
      ? { points: [], more: false, corrupt: [] }
      : await readEventPoints(root, state.tfevents, input.maxBytes);
  for (const problem of events.corrupt)
    input.logger?.warn(
      { runId: input.runId, problem },
      'a TensorBoard event file is corrupt; it is read no further',
    );
  state.mlflow ??= {};
  const launchedAt = Date.parse(input.meta.startedAt ?? input.meta.createdAt);
  const mlflow = await readMlflowPoints(
    mlflowStores(input),
    state.mlflow,
    Number.isFinite(launchedAt) ? launchedAt : 0,
    input.maxBytes,
  );
  for (const point of mlflow.points) point.source = 'mlflow';
  return { points: mergeByStep(events.points, mlflow.points), more: events.more || mlflow.more };
}
