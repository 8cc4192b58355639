import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { checkDivergence } from '../monitor/detectors/loss-detectors.js';
import { type EpisodeBook, isEpisodeActive, observeEpisode } from '../monitor/episodes.js';
import { type MetricRecord, parseMetricLine } from './file-tail.js';
import { readResume } from './run-reports.js';
import { RUN_FILES, type RunStore } from './run-store.js';

/**
 * A run's checkpoints, from what exists today: the helper's `checkpoint saved at step N: path` lines in
 * output.log, plus resume.json (the latest), each matched with the loss at that step and whether the
 * curve was inside a NaN or divergence episode then. One function, so a richer history (checkpoint
 * records with health written at save time) can replace it without touching the tool.
 */

export interface CheckpointRecord {
  step: number;
  path: string | null;
  /** ISO time of the save, when known. */
  time: string | undefined;
  /** Loss at that step (or the last one logged before it). */
  loss: number | undefined;
  healthy: boolean;
  /** Why it is not healthy ("NaN loss", "loss diverging"). */
  problem?: string;
}

export type CheckpointHistory = (runId: string) => Promise<CheckpointRecord[]>;

/** `[2024-05-01T10:00:00+00:00] checkpoint saved at step 10: ckpt/step10.pt` (the helper's log line). */
const SAVED_LINE = /^\[([^\]]+)\] checkpoint saved at step (\d+(?:\.\d+)?)(?:: (.*))?$/;

/** Episodes need this many calm points to end, like the monitor's. */
const RECOVERY_POINTS = 3;

interface StepHealth {
  step: number;
  loss: number | undefined;
  problem: string | undefined;
}

/** Walks the loss curve once and labels each step with the episode it was in, if any. */
export function labelSteps(
  records: MetricRecord[],
  detectors: { divergenceWindow: number; divergenceMinRise: number },
): StepHealth[] {
  const book: EpisodeBook = {};
  const losses: number[] = [];
  const labelled: StepHealth[] = [];
  for (const record of records) {
    if (record.step === undefined) continue;
    const loss = record.values.loss;
    if (loss !== undefined) losses.push(loss);
    observeEpisode(book, 'nan', loss !== undefined && !Number.isFinite(loss), RECOVERY_POINTS);
    observeEpisode(
      book,
      'divergence',
      loss !== undefined && checkDivergence(losses, detectors).diverging,
      RECOVERY_POINTS,
    );
    const problem = isEpisodeActive(book, 'nan')
      ? 'NaN loss'
      : isEpisodeActive(book, 'divergence')
        ? 'loss diverging'
        : undefined;
    labelled.push({ step: record.step, loss, problem });
  }
  return labelled;
}

export function createCheckpointHistory(options: {
  store: RunStore;
  detectors: { divergenceWindow: number; divergenceMinRise: number };
}): CheckpointHistory {
  const { store } = options;
  return async (runId) => {
    const directory = store.runDir(runId);
    const [log, metrics, resume] = await Promise.all([
      readFile(path.join(directory, RUN_FILES.output), 'utf8').catch(() => ''),
      readFile(path.join(directory, RUN_FILES.metrics), 'utf8').catch(() => ''),
      readResume(store, runId),
    ]);
    const byStep = new Map<number, { path: string | null; time: string | undefined }>();
    for (const line of log.split('\n')) {
      const match = SAVED_LINE.exec(line.trim());
      if (match === null) continue;
      byStep.set(Number(match[2]), { path: match[3]?.trim() || null, time: match[1] });
    }
    if (resume?.step !== null && resume?.step !== undefined) {
      const ts = typeof resume.ts === 'number' ? new Date(resume.ts * 1000).toISOString() : undefined;
      byStep.set(resume.step, { path: resume.checkpoint, time: byStep.get(resume.step)?.time ?? ts });
    }
    const records = metrics
      .split('\n')
      .map(parseMetricLine)
      .filter((record) => record !== undefined);
    const steps = labelSteps(records, options.detectors);
    return [...byStep.entries()]
      .sort(([a], [b]) => a - b)
      .map(([step, saved]) => {
        // The last metric at or before the checkpoint (a relaunch may log the same step twice: take the latest).
        let at: StepHealth | undefined;
        for (const candidate of steps) if (candidate.step <= step) at = candidate;
        const record: CheckpointRecord = {
          step,
          path: saved.path,
          time: saved.time,
          loss: at?.loss,
          healthy: at?.problem === undefined,
        };
        if (at?.problem !== undefined) record.problem = at.problem;
        return record;
      });
  };
}
