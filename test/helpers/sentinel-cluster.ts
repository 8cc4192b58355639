import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './free-port.js';
import { removeTree } from './processes.js';

/**
 * A real Redis Sentinel set-up on free loopback ports: a primary, a replica and three sentinels
 * (quorum 2), each a child process this test started and ends by pid.
 */
export interface SentinelCluster {
  name: string;
  primaryPort: number;
  replicaPort: number;
  sentinelPorts: number[];
  /** `REDIS_SENTINELS` for these sentinels. */
  sentinelList: string;
  primary: ChildProcess;
  /** The address the sentinels name as primary right now (`SENTINEL get-master-addr-by-name`). */
  currentPrimaryPort(): Promise<number | undefined>;
  /** `WAIT 1`: resolves once the replica acknowledged every write the primary has taken so far. */
  waitForReplica(): Promise<void>;
  stop(): Promise<void>;
}

const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

function startServer(arguments_: string[], binary = 'redis-server'): ChildProcess {
  const child = spawn(binary, arguments_, { stdio: ['ignore', 'ignore', 'pipe'] });
  child.on('error', () => undefined); // a failed start shows as the wait for it timing out
  child.stderr?.resume();
  return child;
}

/** Polls `check` until it holds; fails with `what` after `timeoutMs`. */
export async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** One command on a short-lived connection (no retries: a dead server is an error, not a wait). */
async function ask(port: number, ...command: [string, ...(string | number)[]]): Promise<unknown> {
  const client = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await client.call(...command);
  } finally {
    client.disconnect();
  }
}

async function endChild(child: ChildProcess): Promise<void> {
  if (exited(child) || child.pid === undefined) return;
  const done = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timeout = new Promise<void>((resolve) => setTimeout(resolve, 5_000).unref());
  await Promise.race([done, timeout]);
  if (!exited(child)) child.kill('SIGKILL');
}

export async function startSentinelCluster(name = 'shepherd-test'): Promise<SentinelCluster> {
  if (spawnSync('redis-sentinel', ['--version'], { stdio: 'ignore' }).status !== 0) {
    throw new Error('redis-sentinel is not on PATH: apt-get install redis-sentinel (.ci/run does)');
  }
  const directory = mkdtempSync(join(tmpdir(), 'shepherd-sentinel-'));
  const primaryPort = await freePort();
  const replicaPort = await freePort();
  const sentinelPorts = [await freePort(), await freePort(), await freePort()];
  const children: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(children.map((child) => endChild(child)));
    removeTree(directory);
  };
  try {
    const common = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    const primary = startServer(['--port', String(primaryPort), '--dir', directory, ...common]);
    children.push(primary);
    await waitUntil('the primary', async () => (await ask(primaryPort, 'PING')) === 'PONG');
    const replicaDirectory = mkdtempSync(join(directory, 'replica-'));
    children.push(
      startServer([
        '--port',
        String(replicaPort),
        '--dir',
        replicaDirectory,
        '--replicaof',
        '127.0.0.1',
        String(primaryPort),
        ...common,
      ]),
    );
    await waitUntil('the replica to sync', async () =>
      String(await ask(replicaPort, 'INFO', 'replication')).includes('master_link_status:up'),
    );
    for (const port of sentinelPorts) {
      const file = join(directory, `sentinel-${port}.conf`);
      // Sentinels rewrite their own file (what they learn about replicas and peers): each gets one.
      writeFileSync(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${directory}`,
          `sentinel monitor ${name} 127.0.0.1 ${primaryPort} 2`,
          `sentinel down-after-milliseconds ${name} 1000`,
          `sentinel failover-timeout ${name} 3000`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      children.push(startServer([file], 'redis-sentinel'));
    }
    // A failover needs the quorum to know the replica and each other (hello messages, every 2 s).
    for (const port of sentinelPorts) {
      await waitUntil(`sentinel ${port} to see the replica and its peers`, async () => {
        const replicas = (await ask(port, 'SENTINEL', 'REPLICAS', name)) as unknown[];
        const peers = (await ask(port, 'SENTINEL', 'SENTINELS', name)) as unknown[];
        return replicas.length === 1 && peers.length === 2;
      });
    }
    const cluster: SentinelCluster = {
      name,
      primaryPort,
      replicaPort,
      sentinelPorts,
      sentinelList: sentinelPorts.map((port) => `127.0.0.1:${port}`).join(','),
      primary,
      async currentPrimaryPort() {
        for (const port of sentinelPorts) {
          const reply = await ask(port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name).catch(() => undefined);
          if (Array.isArray(reply) && reply[1] !== undefined) return Number(reply[1]);
        }
        return undefined;
      },
      async waitForReplica() {
        const acknowledged = Number(await ask(primaryPort, 'WAIT', 1, 5_000));
        if (acknowledged < 1) throw new Error("the replica did not acknowledge the primary's writes in 5 s");
      },
      stop,
    };
    return cluster;
  } catch (error) {
    await stop();
    throw error;
  }
}
