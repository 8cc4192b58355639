import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { checkDivergence } from '../monitor/detectors/loss-detectors.js';
import { type EpisodeBook, isEpisodeActive, observeEpisode } from '../monitor/episodes.js';
import type { CheckpointHistory } from '../runs/checkpoints/checkpoint-history.js';
import { type MetricRecord, parseMetricLine } from '../runs/file-tail.js';
import { RUN_FILES } from '../runs/records/run-files.js';
import type { RunQueries } from '../runs/run-queries.js';

/**
 * What `list_checkpoints` shows: the run's checkpoint history (`checkpoints.jsonl`, with the health the
 * monitor recorded), or for runs from before it, the helper's `checkpoint saved at step N` log lines and
 * resume.json — each with the loss at that step and whether the curve was inside a NaN or divergence
 * episode then (recomputed from metrics.jsonl, so it holds even when no alert was raised).
 */

interface CheckpointRecord {
  step: number;
  path: string | null;
  /** ISO time of the save, when known. */
  time: string | undefined;
  /** Loss at that step (or the last one logged before it). */
  loss: number | undefined;
  healthy: boolean;
  /** Why it is not healthy ("NaN loss", "saved after the NaN at step 26"). */
  problem?: string;
  /** false when the file is gone or was overwritten since the save. */
  intact?: boolean;
}

export type CheckpointLister = (runId: string) => Promise<CheckpointRecord[]>;

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
function labelSteps(
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

interface Saved {
  step: number;
  path: string | null;
  time: string | undefined;
  /** The history's own verdict, when it has one. */
  note?: string;
  intact?: boolean;
}

/** Runs without checkpoints.jsonl: the helper's log lines, plus resume.json for the latest. */
async function savedFromLog(runs: RunQueries, runId: string): Promise<Saved[]> {
  const directory = runs.runDirectory(runId);
  const [log, resume] = await Promise.all([
    readFile(path.join(directory, RUN_FILES.output), 'utf8').catch(() => ''),
    runs.readResume(runId),
  ]);
  const byStep = new Map<number, Saved>();
  for (const line of log.split('\n')) {
    const match = SAVED_LINE.exec(line.trim());
    if (match === null) continue;
    const step = Number(match[2]);
    byStep.set(step, { step, path: match[3]?.trim() || null, time: match[1] });
  }
  if (resume?.step !== null && resume?.step !== undefined) {
    const ts = typeof resume.ts === 'number' ? new Date(resume.ts * 1000).toISOString() : undefined;
    byStep.set(resume.step, {
      step: resume.step,
      path: resume.checkpoint,
      time: byStep.get(resume.step)?.time ?? ts,
    });
  }
  return [...byStep.values()].sort((a, b) => a.step - b.step);
}

export function createCheckpointLister(options: {
  runs: RunQueries;
  history: Pick<CheckpointHistory, 'list'>;
  detectors: { divergenceWindow: number; divergenceMinRise: number };
}): CheckpointLister {
  const { runs } = options;
  return async (runId) => {
    const entries = await options.history.list(runId);
    const saved: Saved[] =
      entries.length > 0
        ? entries.map((entry) => {
            const item: Saved = {
              step: entry.step,
              path: entry.checkpoint,
              time: entry.ts > 0 ? new Date(entry.ts * 1000).toISOString() : undefined,
            };
            if (entry.health === 'bad') item.note = entry.healthNote ?? 'saved during an incident';
            if (entry.intact !== undefined) item.intact = entry.intact;
            return item;
          })
        : await savedFromLog(runs, runId);
    const metrics = await readFile(path.join(runs.runDirectory(runId), RUN_FILES.metrics), 'utf8').catch(
      () => '',
    );
    const steps = labelSteps(
      metrics
        .split('\n')
        .map(parseMetricLine)
        .filter((record) => record !== undefined),
      options.detectors,
    );
    return saved.map((item) => {
      // The last metric at or before the checkpoint (after a relaunch the same step may appear twice).
      let at: StepHealth | undefined;
      for (const candidate of steps) if (candidate.step <= item.step) at = candidate;
      const problem = item.note ?? at?.problem;
      const record: CheckpointRecord = {
        step: item.step,
        path: item.path,
        time: item.time,
        loss: at?.loss,
        healthy: problem === undefined,
      };
      if (problem !== undefined) record.problem = problem;
      if (item.intact !== undefined) record.intact = item.intact;
      return record;
    });
  };
}
