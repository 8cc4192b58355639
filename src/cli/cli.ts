import { createApp } from '../app/app.js';
import { type Config, loadConfig } from '../config/config.js';
import { ConfigError } from '../errors.js';
import { createLogger } from '../logger.js';
import { isAuthRefusal, redisRefusal, redisUrlWithoutPassword } from '../redis/connection.js';
import { scrubRunEnvironment } from '../runs/launch/process-environment.js';
import { userFacingError } from '../runs/operations/run-texts.js';
import { formatDoctorTable, runDoctor } from './doctor.js';

const USAGE = `usage: shepherd <command>

  doctor          check Redis, the LLM endpoint, Slack, Discord, Python, GPUs, Slurm and disk
  runs            list runs (read from Redis; no chat needed)
  status <run>    one run's status, metrics, checkpoint and last log lines
  help            this text

Configuration comes from the environment and ./.env, as for the bot.`;

/** Where the CLI writes; tests capture it. */
interface CliOutput {
  out(text: string): void;
  error(text: string): void;
}

const processOutput: CliOutput = {
  out: (text) => process.stdout.write(text),
  error: (text) => process.stderr.write(text),
};

/** `runs` and `status`: the same text the chat commands answer, built from the same services. */
async function printRuns(
  config: Config,
  command: 'runs' | 'status',
  run: string | undefined,
  io: CliOutput,
): Promise<number> {
  const refusal = await redisRefusal(config);
  if (refusal !== undefined) {
    const url = redisUrlWithoutPassword(config.redisUrl);
    io.error(
      isAuthRefusal(refusal)
        ? `shepherd: Redis at ${url} refuses the credentials (${refusal.message}): run as the bot's user, or fix REDIS_URL\n`
        : `shepherd: no Redis at ${url} (is the bot's Redis running? set REDIS_URL)\n`,
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
    io.out(`${text}\n`);
    return 0;
  } catch (error) {
    io.error(`shepherd: ${userFacingError(error)}\n`);
    return 1;
  } finally {
    await app.stop();
  }
}

export async function main(
  argv: string[],
  environment: Record<string, string | undefined>,
  io: CliOutput = processOutput,
): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    io.out(`${USAGE}\n`);
    return command === undefined ? 2 : 0;
  }
  let config: Config;
  try {
    config = loadConfig(environment, { dotenvPath: '.env' });
  } catch (error) {
    if (error instanceof ConfigError) {
      io.error(`shepherd: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
  switch (command) {
    case 'doctor': {
      const report = await runDoctor(config, {
        environment: { PATH: environment.PATH, SLURM_CONF: environment.SLURM_CONF },
        runEnvironment: scrubRunEnvironment(environment),
      });
      io.out(`${formatDoctorTable(report)}\n`);
      return report.failed ? 1 : 0;
    }
    case 'runs':
      return printRuns(config, 'runs', undefined, io);
    case 'status':
      if (rest[0] === undefined) {
        io.error('usage: shepherd status <run>\n');
        return 2;
      }
      return printRuns(config, 'status', rest[0], io);
    default:
      io.error(`shepherd: unknown command "${command}"\n${USAGE}\n`);
      return 2;
  }
}
