/**
 * The shell that runs `--eval` where Shepherd has no launcher of its own (a Slurm batch script, a
 * Kubernetes pod's command): training first, then the eval command in the run directory, with
 * `evaluation.json` written around it the way the local launcher writes it.
 */

/** Quote a value for a POSIX shell (single quotes; embedded quotes closed and escaped). */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * How a stop reaches training. `group`: the scheduler signals every process of the job (Slurm), so a TERM
 * only sets a flag in the shell. `forward`: only the shell gets it (a pod's PID 1), so training runs in
 * the background and the shell passes the TERM on and waits for it to end.
 */
type StopSignalling = 'group' | 'forward';

function trainingLines(training: string, stop: StopSignalling): string[] {
  if (stop === 'group') return ["trap 'shepherd_stopped=1' TERM", training, 'shepherd_rc=$?'];
  return [
    `trap 'shepherd_stopped=1; [ -n "$shepherd_pid" ] && kill -TERM "$shepherd_pid" 2>/dev/null' TERM`,
    'shepherd_pid=',
    `${training} &`,
    'shepherd_pid=$!',
    'wait "$shepherd_pid"',
    'shepherd_rc=$?',
    // A trapped TERM interrupts `wait`: wait again for training's own exit code.
    'while [ -n "$shepherd_stopped" ] && kill -0 "$shepherd_pid" 2>/dev/null; do wait "$shepherd_pid"; shepherd_rc=$?; done',
  ];
}

/**
 * Prefix of the line that stands for evaluation.json where Shepherd reads only the job's log (HF Jobs):
 * `[shepherd:evaluation] {"status": "running", "startedAt": …}`. Its follower writes the file from it.
 */
export const EVALUATION_MARKER = '[shepherd:evaluation] ';

/**
 * Where the evaluation's record goes. `file`: evaluation.json in `$SHEPHERD_RUN_DIR`, a directory Shepherd
 * shares (Slurm, a Kubernetes PVC). `log`: a marker line in the job's log, the eval run in the job's
 * working directory (HF Jobs, whose files Shepherd never sees).
 */
type EvaluationRecording = 'file' | 'log';

const RECORDERS: Record<EvaluationRecording, { define: string; directory: string }> = {
  file: {
    define:
      'shepherd_evaluation() { printf "$@" > .evaluation.json.tmp && mv -f .evaluation.json.tmp evaluation.json; }',
    directory: '"$SHEPHERD_RUN_DIR"',
  },
  log: {
    define: `shepherd_evaluation() { local format="$1"; shift; printf "${EVALUATION_MARKER}$format" "$@"; }`,
    directory: '"$PWD"',
  },
};

interface EvaluationOptions {
  recording?: EvaluationRecording;
  /**
   * Several processes run these lines (one per node, a multi-node Kubernetes Job): the variable holding
   * each one's rank. Only rank 0 evaluates; the others exit with training's code.
   */
  rankVariable?: string;
}

/**
 * Bash lines: training (a shell command line), then, after it exits 0 and was not stopped, the eval
 * command in `$SHEPHERD_RUN_DIR` (or the job's directory) with its output in eval.log and the job's log,
 * evaluation.json (or its marker line) saying running, then how it ended (the local launcher's fields).
 * Exits with the training's code: an eval failure does not undo the training.
 */
export function evaluationLines(
  training: string,
  evalCommand: string,
  stop: StopSignalling,
  options: EvaluationOptions = {},
): string[] {
  const recorder = RECORDERS[options.recording ?? 'file'];
  const rank = options.rankVariable === undefined ? '' : ` && [ "\${${options.rankVariable}:-0}" = 0 ]`;
  return [
    recorder.define,
    'shepherd_stopped=',
    ...trainingLines(training, stop),
    `if [ "$shepherd_rc" -eq 0 ] && [ -z "$shepherd_stopped" ]${rank} && cd ${recorder.directory}; then`,
    '  shepherd_started=$(date +%s)',
    `  shepherd_evaluation '{"status": "running", "startedAt": %s}\\n' "$shepherd_started"`,
    `  echo ${shellQuote(`=== evaluation: ${evalCommand} ===`)}`,
    `  /bin/sh -c ${shellQuote(evalCommand)} < /dev/null 2>&1 | tee -a eval.log`,
    `  shepherd_eval_rc=\${PIPESTATUS[0]}`,
    '  shepherd_eval_status=failed',
    '  [ "$shepherd_eval_rc" -eq 0 ] && shepherd_eval_status=passed',
    `  shepherd_evaluation '{"status": "%s", "exitCode": %s, "startedAt": %s, "endedAt": %s}\\n' "$shepherd_eval_status" "$shepherd_eval_rc" "$shepherd_started" "$(date +%s)"`,
    '  echo "=== evaluation ended: exit code $shepherd_eval_rc ==="',
    'fi',
    'exit "$shepherd_rc"',
  ];
}
