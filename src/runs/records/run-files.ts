import { fileURLToPath } from 'node:url';

/** Directory holding `shepherd.py` and the launcher; prepended to every run's PYTHONPATH. */
export const PYTHON_RUNTIME_DIR = fileURLToPath(new URL('../python/', import.meta.url));

/** The files every run directory holds. Use these names; do not write the literals elsewhere. */
export const RUN_FILES = {
  meta: 'meta.json',
  metrics: 'metrics.jsonl',
  /** Points the monitor parsed from output.log, in the metrics.jsonl format. */
  stdoutMetrics: 'stdout-metrics.jsonl',
  output: 'output.log',
  script: 'train.py',
  audit: 'audit.jsonl',
  resume: 'resume.json',
  /** The checkpoint history the helper appends to (see checkpoint-history). */
  checkpoints: 'checkpoints.jsonl',
  exitStatus: 'exit_status.json',
  finish: 'finish.json',
  /** The launcher's record of the `--eval` command: running, then passed/failed with its exit code. */
  evaluation: 'evaluation.json',
  /** The `--eval` command's output (also copied into output.log). */
  evalLog: 'eval.log',
  /** One JSON line per `shepherd.log_eval` call. */
  evalResults: 'eval_results.jsonl',
  /** The final model directory `shepherd.save_model` named. */
  model: 'model.json',
  /** One JSON line per `shepherd.alert(…)` the script raised (not its suppressed repeats). */
  alerts: 'alerts.jsonl',
  /** Folder of the checkpoints Shepherd pinned for a fix's resume (see checkpoint-pins). */
  pinned: '.shepherd/pinned',
  /** One JSON line per process that imported the helper: the pids that dump their stacks on SIGUSR2. */
  stackSignal: '.shepherd/stack-signal.jsonl',
} as const;
