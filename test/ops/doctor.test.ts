import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatDoctorTable, runDoctor } from '../../src/cli/doctor.js';
import { type Config, loadConfig } from '../../src/config/config.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { type SlackEmulator, startSlackEmulator } from '../slack/emulator/emulator.js';
import { freePort } from './redis-process.js';

const MANIFEST_SCOPES = [
  'app_mentions:read',
  'chat:write',
  'channels:history',
  'groups:history',
  'im:history',
  'mpim:history',
  'users:read',
  'files:write',
  'commands',
];

const probeEnvironment = { PATH: process.env.PATH };

function statusOf(report: Awaited<ReturnType<typeof runDoctor>>, name: string) {
  return report.results.find((result) => result.name === name);
}

describe('shepherd doctor', () => {
  let llm: ScriptedLlmServer;
  let slack: SlackEmulator;
  let closedPort: number;
  const configWith = (overrides: Record<string, string>): Config =>
    loadConfig({
      REDIS_URL: TEST_REDIS_URL,
      SHEPHERD_LLM_BASE_URL: llm.url,
      SLACK_BOT_TOKEN: slack.botToken,
      SLACK_APP_TOKEN: slack.appToken,
      SLACK_API_URL: slack.apiUrl,
      SHEPHERD_PYTHON: '/usr/bin/python3',
      ...overrides,
    });

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'pong' } });
    slack = await startSlackEmulator({ grantedScopes: MANIFEST_SCOPES });
    closedPort = await freePort();
  });
  afterAll(async () => {
    await llm.close();
    await slack.close();
  });

  it('passes on a working set-up and skips what is not configured', async () => {
    const report = await runDoctor(configWith({}), { environment: probeEnvironment });
    expect(report.failed, formatDoctorTable(report)).toBe(false);
    expect(statusOf(report, 'redis')?.status).toBe('ok');
    expect(statusOf(report, 'llm')?.status).toBe('ok');
    expect(statusOf(report, 'slack')?.status).toBe('ok');
    expect(statusOf(report, 'slack scopes')?.status).toBe('ok');
    expect(statusOf(report, 'slack socket')?.status).toBe('ok');
    expect(statusOf(report, 'python helper')?.status).toBe('ok');
    expect(statusOf(report, 'discord')?.status).toBe('skip');
    expect(statusOf(report, 'slurm')?.status).toBe('skip');
    // The one-token request reached the model endpoint.
    expect(llm.requests.at(-1)?.body.max_tokens).toBe(1);
  });

  it('fails naming Redis when Redis is down', async () => {
    const report = await runDoctor(configWith({ REDIS_URL: `redis://127.0.0.1:${closedPort}` }), {
      environment: probeEnvironment,
    });
    expect(report.failed).toBe(true);
    expect(statusOf(report, 'redis')?.status).toBe('fail');
    expect(statusOf(report, 'redis')?.fix).toMatch(/REDIS_URL/);
    expect(statusOf(report, 'llm')?.status).toBe('ok');
  });

  it('fails naming the LLM when its endpoint is down', async () => {
    const report = await runDoctor(
      configWith({ SHEPHERD_LLM_BASE_URL: `http://127.0.0.1:${closedPort}/v1` }),
      {
        environment: probeEnvironment,
      },
    );
    expect(report.failed).toBe(true);
    expect(statusOf(report, 'llm')?.status).toBe('fail');
    expect(statusOf(report, 'llm')?.detail).toContain(String(closedPort));
  });

  it('fails naming Slack when the bot token is refused, and names missing scopes', async () => {
    const bad = await runDoctor(configWith({ SLACK_BOT_TOKEN: 'xoxb-not-the-right-one' }), {
      environment: probeEnvironment,
    });
    expect(bad.failed).toBe(true);
    expect(statusOf(bad, 'slack')?.status).toBe('fail');
    expect(statusOf(bad, 'slack')?.detail).toContain('invalid_auth');

    const narrow = await startSlackEmulator({ grantedScopes: ['chat:write', 'app_mentions:read'] });
    try {
      const report = await runDoctor(
        configWith({
          SLACK_BOT_TOKEN: narrow.botToken,
          SLACK_APP_TOKEN: narrow.appToken,
          SLACK_API_URL: narrow.apiUrl,
        }),
        { environment: probeEnvironment },
      );
      expect(statusOf(report, 'slack scopes')?.status).toBe('fail');
      expect(statusOf(report, 'slack scopes')?.detail).toContain('files:write');
    } finally {
      await narrow.close();
    }
  });

  it('exits 1 from the command line with the failing check in the table', async () => {
    const bin = fileURLToPath(new URL('../../bin/shepherd.js', import.meta.url));
    const child = spawn(process.execPath, [bin, 'doctor'], {
      env: {
        PATH: process.env.PATH,
        REDIS_URL: `redis://127.0.0.1:${closedPort}`,
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_RUN_ENV_WANDB_API_KEY: 'wandb-key-never-printed',
        WANDB_MODE: 'offline',
        // Not passed: the bot's own keys never reach a run.
        HF_TOKEN: 'hf_bot_own_token',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk) => {
      stdout += String(chunk);
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(1);
    expect(stdout).toMatch(/FAIL\s+redis\s+cannot reach/);
    expect(stdout).toMatch(/ok\s+llm\s/);
    expect(stdout).toMatch(
      /ok\s+tracker variables\s+passed to runs: WANDB_API_KEY, WANDB_MODE; not passed: HF_TOKEN, MLFLOW_TRACKING_URI, MLFLOW_TRACKING_TOKEN/,
    );
    expect(stdout).not.toContain('wandb-key-never-printed');
  });
});
