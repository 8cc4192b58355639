import { describe, expect, it } from 'vitest';
import { scrubRunEnvironment } from '../../src/runs/launch/process-environment.js';

describe('run environment', () => {
  it('keeps the ordinary environment and drops the bot’s settings and secrets', () => {
    const scrubbed = scrubRunEnvironment({
      PATH: '/usr/bin',
      HOME: '/root',
      SLURM_CONF: '/etc/slurm.conf',
      SLACK_BOT_TOKEN: 'xoxb-1',
      DISCORD_TOKEN: 'abc',
      SHEPHERD_LLM_API_KEY: 'sk-1',
      OPENAI_API_KEY: 'sk-2',
      REDIS_URL: 'redis://x',
      HF_TOKEN: 'hf_1',
      SHEPHERD_RUN_ENV_HF_TOKEN: 'hf_2',
    });
    expect(scrubbed).toEqual({
      PATH: '/usr/bin',
      HOME: '/root',
      SLURM_CONF: '/etc/slurm.conf',
      HF_TOKEN: 'hf_2',
    });
  });

  it('drops variables named like a key, as the README promises', () => {
    const scrubbed = scrubRunEnvironment({
      PATH: '/usr/bin',
      MY_SERVICE_KEY: 'k1',
      AWS_ACCESS_KEY_ID: 'AKIA',
      AWS_SECRET_ACCESS_KEY: 's',
      SSHKEY: 'k2',
      STRIPE_KEYS: 'k3',
      DB_PASSWD: 'p',
      SESSION_COOKIE: 'c',
      KEYBOARD_LAYOUT: 'us',
      MONKEY_NAME: 'bob',
      SHEPHERD_RUN_ENV_WANDB_API_KEY: 'kept-on-purpose',
    });
    expect(scrubbed).toEqual({
      PATH: '/usr/bin',
      KEYBOARD_LAYOUT: 'us',
      WANDB_API_KEY: 'kept-on-purpose',
    });
  });
});
