import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { readTail } from './file-tail.js';
import { RUN_FILES } from './records/run-files.js';
import type { EvaluationRecord, SavedModel } from './records/run-types.js';

/**
 * What a run leaves behind for its evaluation and its final model: the launcher's `evaluation.json`, the
 * helper's `eval_results.jsonl` and `model.json`, and eval dicts printed by the script or the eval command
 * (`{'eval_loss': 0.31, 'eval_accuracy': 0.9}`, as the HF Trainer prints them).
 */

const EPOCH_SECONDS = z.number().nonnegative();

export const evaluationFileSchema = z.object({
  status: z.enum(['running', 'passed', 'failed']),
  exitCode: z.number().int().optional(),
  startedAt: EPOCH_SECONDS.optional(),
  endedAt: EPOCH_SECONDS.optional(),
});
type EvaluationFile = z.infer<typeof evaluationFileSchema>;

export const modelFileSchema = z.object({
  path: z.string().min(1),
  info: z.record(z.string(), z.unknown()).default({}),
  step: z.number().optional(),
  ts: EPOCH_SECONDS,
  /** Set by Shepherd when the directory is not on its host (`HF job <id>`); the helper never writes it. */
  location: z.string().optional(),
});

/** Bytes of output.log / eval.log scanned for printed eval dicts. */
const PRINTED_TAIL_BYTES = 256 * 1024;

async function readJson(file: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/** The launcher's record of the evaluation, or undefined before it started (or when unreadable). */
export async function readEvaluationFile(runDir: string): Promise<EvaluationFile | undefined> {
  const parsed = evaluationFileSchema.safeParse(await readJson(path.join(runDir, RUN_FILES.evaluation)));
  return parsed.success ? parsed.data : undefined;
}

/** The model directory `shepherd.save_model` recorded, or undefined. */
export async function readSavedModel(runDir: string): Promise<SavedModel | undefined> {
  const parsed = modelFileSchema.safeParse(await readJson(path.join(runDir, RUN_FILES.model)));
  if (!parsed.success) return undefined;
  const { path: modelPath, info, step, ts, location } = parsed.data;
  const model: SavedModel = { path: modelPath, info, savedAt: new Date(ts * 1000).toISOString() };
  if (step !== undefined) model.step = step;
  if (location !== undefined) model.location = location;
  return model;
}

/** Numbers of `log_eval` lines, in order (a torn or malformed line is skipped). */
async function loggedResults(runDir: string): Promise<Record<string, number>> {
  const results: Record<string, number> = {};
  const text = await readFile(path.join(runDir, RUN_FILES.evalResults), 'utf8').catch(() => '');
  for (const line of text.split('\n')) {
    const parsed = z.record(z.string(), z.unknown()).safeParse(safeJson(line));
    if (!parsed.success) continue;
    for (const [name, value] of Object.entries(parsed.data)) {
      if (name !== 'ts' && typeof value === 'number') results[name] = value;
    }
  }
  return results;
}

function safeJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/**
 * Printed dicts in a log: every number of the dict when `allKeys` (the eval command's own log), else only
 * the `eval_*` names (the training log also prints its loss dicts).
 */
function printedEvalResults(text: string, allKeys: boolean): Record<string, number> {
  const results: Record<string, number> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    // `print(dict)` of numbers, as the HF Trainer prints its logs (the monitor's stdout parser reads the
    // same lines; this folder cannot import it).
    if (!line.startsWith("{'") || !line.endsWith('}')) continue;
    for (const match of line.matchAll(DICT_ENTRY)) {
      const [, name, text] = match;
      const value = Number(text);
      if (name !== undefined && Number.isFinite(value) && (allKeys || name.startsWith('eval_')))
        results[name] = value;
    }
  }
  return results;
}

/** `'name': 0.31` (also `np.float64(0.31)` / `tensor(0.31)` wrapped). */
const DICT_ENTRY =
  /'([\w./-]{1,80})':\s*(?:np\.float\d*\(|tensor\()?(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)/g;

/** Eval numbers of a run: printed during training, then by the eval command, then `log_eval` (last wins). */
async function readEvalResults(runDir: string): Promise<Record<string, number>> {
  const [training, evaluation, logged] = await Promise.all([
    readTail(path.join(runDir, RUN_FILES.output), PRINTED_TAIL_BYTES).catch(() => ''),
    readTail(path.join(runDir, RUN_FILES.evalLog), PRINTED_TAIL_BYTES).catch(() => ''),
    loggedResults(runDir),
  ]);
  return { ...printedEvalResults(training, false), ...printedEvalResults(evaluation, true), ...logged };
}

/** The evaluation as recorded on the run when it ends; undefined when the run had none and printed none. */
export async function collectEvaluation(
  runDir: string,
  evalCommand: string | undefined,
): Promise<EvaluationRecord | undefined> {
  const [file, results] = await Promise.all([readEvaluationFile(runDir), readEvalResults(runDir)]);
  if (evalCommand === undefined && Object.keys(results).length === 0) return undefined;
  // A command that never got to write its end (the launcher was killed) did not pass.
  const passed = evalCommand === undefined || file?.status === 'passed';
  const record: EvaluationRecord = { status: passed ? 'passed' : 'failed', results };
  if (file?.exitCode !== undefined) record.exitCode = file.exitCode;
  if (file?.startedAt !== undefined) record.startedAt = new Date(file.startedAt * 1000).toISOString();
  if (file?.endedAt !== undefined) record.endedAt = new Date(file.endedAt * 1000).toISOString();
  return record;
}
