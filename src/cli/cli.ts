import { Redis } from 'ioredis';
import { createApp } from '../app.js';
import { type Config, loadConfig } from '../config.js';
import { ConfigError } from '../errors.js';
import { createLogger } from '../logger.js';
import { formatDoctorTable, runDoctor } from './doctor.js';

const USAGE = `usage: shepherd <command>

  doctor          check Redis, the LLM endpoint, Slack, Discord, Python, GPUs, Slurm and disk
  runs            list runs (read from Redis; no chat needed)
  status <run>    one run's status, metrics, checkpoint and last log lines
  help            this text

Configuration comes from the environment and ./.env, as for the bot.`;

async function redisAnswers(url: string): Promise<boolean> {
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 3000,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

/** `runs` and `status`: the same text the chat commands answer, built from the same services. */
async function printRuns(
  config: Config,
  command: 'runs' | 'status',
  run: string | undefined,
): Promise<number> {
  if (!(await redisAnswers(config.redisUrl))) {
    process.stderr.write(
      `shepherd: no Redis at ${config.redisUrl} (is the bot's Redis running? set REDIS_URL)\n`,
    );
    return 1;
  }
  // Nothing is started: no adapter listens and no worker takes jobs; only reads happen.
  const app = await createApp({ ...config, role: 'bot' }, createLogger('silent'));
  try {
    const text =
      command === 'runs'
        ? await app.features.operations.list()
        : await app.features.operations.status(run ?? '');
    process.stdout.write(`${text}\n`);
    return 0;
  } catch (error) {
    process.stderr.write(`shepherd: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

export async function main(argv: string[], environment: Record<string, string | undefined>): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined ? 2 : 0;
  }
  let config: Config;
  try {
    config = loadConfig(environment, { dotenvPath: '.env' });
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`shepherd: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
  switch (command) {
    case 'doctor': {
      const report = await runDoctor(config, {
        environment: { PATH: environment.PATH, SLURM_CONF: environment.SLURM_CONF },
      });
      process.stdout.write(`${formatDoctorTable(report)}\n`);
      return report.failed ? 1 : 0;
    }
    case 'runs':
      return printRuns(config, 'runs', undefined);
    case 'status':
      if (rest[0] === undefined) {
        process.stderr.write('usage: shepherd status <run>\n');
        return 2;
      }
      return printRuns(config, 'status', rest[0]);
    default:
      process.stderr.write(`shepherd: unknown command "${command}"\n${USAGE}\n`);
      return 2;
  }
}
