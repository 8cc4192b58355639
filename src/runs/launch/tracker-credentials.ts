/**
 * Tracker credentials a run needs: a script that logs to W&B must get a key (`SHEPHERD_RUN_ENV_WANDB_API_KEY`
 * reaches it as `WANDB_API_KEY`) or run W&B offline, else `wandb.init` stops at a login prompt or fails.
 */

/** Variables trackers read, as the run sees them; `doctor` reports which are passed. */
export const TRACKER_VARIABLES = [
  'WANDB_API_KEY',
  'WANDB_MODE',
  'HF_TOKEN',
  'MLFLOW_TRACKING_URI',
  'MLFLOW_TRACKING_TOKEN',
] as const;

const IMPORTS_WANDB = /^\s*(?:import\s+wandb\b|from\s+wandb\b)/m;
const OFFLINE_MODES = new Set(['offline', 'disabled', 'dryrun']);

/** Card warnings for trackers the script uses without what they need reaching the run. */
export function trackerWarnings(
  script: string,
  environment: Readonly<Record<string, string | undefined>>,
): string[] {
  if (!IMPORTS_WANDB.test(script)) return [];
  if ((environment.WANDB_API_KEY ?? '') !== '') return [];
  if (OFFLINE_MODES.has((environment.WANDB_MODE ?? '').toLowerCase())) return [];
  return [
    'the script imports wandb, but no W&B key reaches the run and WANDB_MODE is not offline: wandb.init will ask for a login or fail unless the machine is logged in (~/.netrc). Set SHEPHERD_RUN_ENV_WANDB_API_KEY, or WANDB_MODE=offline',
  ];
}

/** Which tracker variables reach runs (names only, never values). */
export function passedTrackerVariables(environment: Readonly<Record<string, string | undefined>>): string[] {
  return TRACKER_VARIABLES.filter((name) => (environment[name] ?? '') !== '');
}
