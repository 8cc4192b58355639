import { Redis } from 'ioredis';
import { loadConfig } from './config.js';

/*
 * The container's HEALTHCHECK (`node dist/src/healthcheck.js`): a bot (or `all`) answers `/healthz` on
 * loopback; a worker, which serves no HTTP, must reach its Redis. Exit 0 healthy, 1 not.
 */

async function check(): Promise<void> {
  const config = loadConfig(process.env, { dotenvPath: '.env' });
  if (config.role === 'worker') {
    const redis = new Redis(config.redisUrl, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      if ((await redis.ping()) !== 'PONG') throw new Error('redis did not answer PONG');
    } finally {
      redis.disconnect();
    }
    return;
  }
  const response = await fetch(`http://127.0.0.1:${config.port}/healthz`, {
    signal: AbortSignal.timeout(4000),
  });
  if (response.status !== 200) throw new Error(`/healthz answered ${response.status}`);
}

check().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`unhealthy: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
