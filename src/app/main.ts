import { type Config, loadConfig } from '../config/config.js';
import { ConfigError } from '../errors.js';
import { createLogger } from '../logger.js';
import { redisConnectionOptions } from '../redis/connection.js';
import { ensureRedis } from '../redis/embedded-redis.js';
import { scrubRunEnvironment } from '../runs/launch/process-environment.js';
import { registerSecretValues } from '../text/redact.js';
import { SHUTDOWN_FORCE_EXIT_MS } from './shutdown.js';

/** Entry point: the only place that reads `process.env`. */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig(process.env, { dotenvPath: '.env' });
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`shepherd: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  registerSecretValues(config.secretValues);
  // The app is loaded only once the configuration holds, so a refusal is printed at once.
  const { createApp } = await import('./app.js');
  const logger = createLogger(
    config.logLevel,
    {},
    {
      format: config.ops.logFormat,
      isTerminal: process.stdout.isTTY === true,
    },
  );
  const redis = await ensureRedis(config, { logger });
  // The embedded Redis's password is redacted like the bot's other secrets.
  registerSecretValues([redisConnectionOptions(config).password]);
  const app = await createApp(config, logger, { runEnvironment: scrubRunEnvironment(process.env) });
  await app.start();

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: finishing running jobs');
    const force = setTimeout(() => process.exit(1), SHUTDOWN_FORCE_EXIT_MS);
    force.unref();
    try {
      await app.stop();
      await redis.stop();
    } finally {
      process.exit(0);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((error: unknown) => {
  process.stderr.write(
    `shepherd: failed to start: ${error instanceof Error ? error.stack : String(error)}\n`,
  );
  process.exit(1);
});
