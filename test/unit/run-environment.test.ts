import { describe, expect, it } from 'vitest';
import { scrubRunEnvironment } from '../../src/runs/run-environment.js';

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
});
