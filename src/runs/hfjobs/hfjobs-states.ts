import type { ProcessState } from '../executor.js';

/**
 * HF job stages and what they mean for a run. The stage names are the Hub's own, as the Python client
 * lists them (`JobStage` in huggingface_hub `_jobs_api.py`, copied there from the Hub's server):
 * SCHEDULING, RUNNING, COMPLETED, CANCELED, ERROR, DELETED. The JS client's `JobStatusStage` type
 * (@huggingface/hub 2.17.5) names Space stages instead (PAUSED, STOPPED, UPDATING, DELETING); those are
 * mapped too, so an answer in either vocabulary reads right.
 */

/** The stages after which a job never runs again (`TERMINAL_JOB_STAGES` in the Python client). */
const FINAL_STAGES: ReadonlySet<string> = new Set([
  'COMPLETED',
  'CANCELED',
  'ERROR',
  'DELETED',
  'STOPPED',
  'DELETING',
]);

export function isFinalStage(stage: string): boolean {
  return FINAL_STAGES.has(stage);
}

const TIMEOUT_TEXT = /time(?:d)?[\s-]?out|timeout|deadline/i;
const MEMORY_TEXT = /out of memory|\boom\b|oomkilled/i;
const EXIT_CODE_TEXT = /exit(?:ed)?(?: with)?(?: status| code)?:?\s*(\d{1,3})\b/i;

/** Stage + message as the Hub reports them (`ApiJob.status`). */
interface JobStatus {
  stage: string;
  message?: string | null | undefined;
}

function errorState(message: string | undefined): ProcessState {
  const code = message === undefined ? undefined : EXIT_CODE_TEXT.exec(message)?.[1];
  const exitCode = code === undefined || Number(code) === 0 ? 1 : Number(code);
  const state: ProcessState = { kind: 'exited', exitCode };
  if (message !== undefined && TIMEOUT_TEXT.test(message)) state.crashClass = 'timeout';
  else if (message !== undefined && MEMORY_TEXT.test(message)) state.crashClass = 'out_of_memory';
  state.reason = message ?? 'HF Jobs reports ERROR without a message';
  return state;
}

/**
 * The run's process state for a job status. `flavor` only words the waiting reason. A job keeps no exit
 * code the API returns, so COMPLETED is exit 0 and ERROR exit 1 unless its message names another code.
 */
export function jobStateOf(status: JobStatus, flavor?: string): ProcessState {
  const message = status.message === null || status.message === undefined ? undefined : status.message.trim();
  const said = message === undefined || message === '' ? undefined : message;
  switch (status.stage) {
    case 'SCHEDULING':
      return {
        kind: 'pending',
        reason: `HF Jobs is scheduling the job${flavor === undefined ? '' : ` on ${flavor}`}${said === undefined ? '' : ` (${said})`}`,
      };
    case 'RUNNING':
    case 'UPDATING':
      return { kind: 'alive' };
    case 'COMPLETED':
      return { kind: 'exited', exitCode: 0 };
    case 'ERROR':
      return errorState(said);
    case 'CANCELED':
    case 'STOPPED':
      // Cancelling stops the container; the Hub does not say with which signal, SIGTERM is docker's first.
      return { kind: 'signaled', signal: 'SIGTERM', crashClass: 'cancelled' };
    case 'DELETED':
    case 'DELETING':
      return { kind: 'unknown', reason: 'the HF job was deleted' };
    default:
      return {
        kind: 'unknown',
        reason: `HF Jobs reports stage ${status.stage}${said === undefined ? '' : ` (${said})`}`,
      };
  }
}
