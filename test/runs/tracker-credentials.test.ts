import { describe, expect, it } from 'vitest';
import { passedTrackerVariables, trackerWarnings } from '../../src/runs/launch/tracker-credentials.js';

describe('tracker credentials', () => {
  const script = 'import torch\nimport wandb\nwandb.init(project="p")\n';

  it('warns when the script imports wandb and neither a key nor offline mode reaches the run', () => {
    expect(trackerWarnings(script, {})).toHaveLength(1);
    expect(trackerWarnings('from wandb import init\n', { WANDB_MODE: '' })[0]).toMatch(
      /SHEPHERD_RUN_ENV_WANDB_API_KEY, or WANDB_MODE=offline/,
    );
    expect(trackerWarnings(script, { WANDB_API_KEY: 'k' })).toEqual([]);
    expect(trackerWarnings(script, { WANDB_MODE: 'Offline' })).toEqual([]);
    expect(trackerWarnings(script, { WANDB_MODE: 'disabled' })).toEqual([]);
    // Mentions are not imports.
    expect(trackerWarnings('# we used to import wandb here\nprint("wandb")\n', {})).toEqual([]);
  });

  it('names the tracker variables that reach runs, never their values', () => {
    expect(passedTrackerVariables({ WANDB_API_KEY: 'secret', HF_TOKEN: '', PATH: '/bin' })).toEqual([
      'WANDB_API_KEY',
    ]);
  });
});
