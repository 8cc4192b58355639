import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { startTurnDispatcher } from '../../src/queue/turn-dispatcher.js';
import { createTurnInbox } from '../../src/queue/turn-inbox.js';
import { uniquePrefix } from '../helpers/redis.js';
import { until } from '../helpers/until.js';
import { freePort, startOwnRedis, stopOwnRedis } from '../ops/redis-process.js';

/**
 * Closing a turn worker waits for its dispatcher. With Redis gone, the dispatcher's blocking connection
 * sits between reconnect attempts and a command queued on it never settles: stop must still end (CI's
 * readyz test hung 60 s in its teardown after Redis had been stopped and restarted).
 */
describe('turn dispatcher stop', () => {
  it('ends promptly while its connection is reconnecting to a Redis that is down', async () => {
    const port = await freePort();
    let server = await startOwnRedis(port);
    const redis = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: null });
    redis.on('error', () => undefined);
    const prefix = uniquePrefix('dispatch-stop');
    const warnings: string[] = [];
    const logger = createLogger(
      'warn',
      {},
      { destination: { write: (line: string) => warnings.push(line) } },
    );
    const dispatcher = startTurnDispatcher({
      connection: redis,
      inbox: createTurnInbox({ redis, prefix }),
      addTurns: async () => undefined,
      logger,
    });
    try {
      await stopOwnRedis(server);
      await until(() => redis.status === 'reconnecting', 'the connection to notice Redis is gone', 10_000);
      // Its take is parked on its own connection, which is reconnecting too (resent once Redis is back).
      const started = Date.now();
      await dispatcher.stop();
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      redis.disconnect();
      server = await startOwnRedis(port);
      await stopOwnRedis(server);
    }
  });

  it('ends promptly when stopped just after Redis came back', { timeout: 120_000 }, async () => {
    const port = await freePort();
    let server = await startOwnRedis(port);
    const redis = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: null });
    redis.on('error', () => undefined);
    const prefix = uniquePrefix('dispatch-restart');
    try {
      for (let round = 0; round < 8; round++) {
        const dispatcher = startTurnDispatcher({
          connection: redis,
          inbox: createTurnInbox({ redis, prefix }),
          addTurns: async () => undefined,
          logger: createLogger('silent'),
        });
        await new Promise((resolve) => setTimeout(resolve, 50));
        await stopOwnRedis(server);
        server = await startOwnRedis(port);
        const started = Date.now();
        await dispatcher.stop();
        expect(Date.now() - started).toBeLessThan(5_000);
      }
    } finally {
      redis.disconnect();
      await stopOwnRedis(server);
    }
  });
});
