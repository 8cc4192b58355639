import { loadConfig } from '../config/config.js';

/*
 * The container's HEALTHCHECK (`node dist/src/app/healthcheck.js`): every role (bot, worker, all) answers
 * `/healthz` on its own HTTP port (see docs/operations.md); asked on loopback, so the playground's Host
 * check and token never stand in the way. Exit 0 healthy, 1 not.
 */

async function check(): Promise<void> {
  const config = loadConfig(process.env, { dotenvPath: '.env' });
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
