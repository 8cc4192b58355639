import { collectEvaluation, readEvaluationFile, readSavedModel } from './evaluation-files.js';
import type { RunMeta } from './records/run-types.js';

/** A run that completed: its evaluation and saved model, for the meta, and a note for the thread. */
export async function completionPatch(
  runDir: string,
  meta: RunMeta,
): Promise<{ patch: Partial<RunMeta>; note: string | undefined }> {
  const [evaluation, model] = await Promise.all([
    collectEvaluation(runDir, meta.evalCommand),
    readSavedModel(runDir),
  ]);
  const patch: Partial<RunMeta> = {};
  if (evaluation !== undefined) patch.evaluation = evaluation;
  if (model !== undefined) patch.model = model;
  const note =
    evaluation?.status === 'failed'
      ? `evaluation failed${evaluation.exitCode === undefined ? '' : ` (exit ${evaluation.exitCode})`}; the training result stands`
      : undefined;
  return { patch, note };
}

/** Whether the launcher has started the run's `--eval` command (training exited 0). */
export async function evaluationStarted(runDir: string, meta: RunMeta): Promise<boolean> {
  if (meta.evalCommand === undefined || meta.status !== 'running') return false;
  return (await readEvaluationFile(runDir))?.status === 'running';
}
