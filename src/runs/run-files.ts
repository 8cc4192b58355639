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
  exitStatus: 'exit_status.json',
  finish: 'finish.json',
} as const;
