/**
 * Issue 26 item 2: runs cannot reach Redis. The embedded Redis (started by `npm start` when nothing
 * answers) requires a password generated at its first start and kept in `<dataDir>/redis/password`
 * (0600, in a 0700 directory): the bot and `doctor` read it, a run under the run user cannot, and a
 * connection without it gets NOAUTH. External Redis with an ACL user and with TLS (`rediss://`,
 * `REDIS_TLS_CA_FILE`) carries a whole approved run. Every redis-server here is the test's own, on a
 * free port, ended by its pid.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { checkRedis } from '../../src/cli/check-redis.js';
import { main } from '../../src/cli/cli.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/logger.js';
import { connectProbe, createProbeRedis } from '../../src/redis/connection.js';
import { ensureRedis } from '../../src/redis/embedded-redis.js';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { freePort } from '../helpers/free-port.js';
import { uniquePrefix } from '../helpers/redis.js';
import { ensureRunUser, RUN_USER } from '../helpers/run-user.js';

const runUserSkip = ensureRunUser();
if (runUserSkip !== undefined) {
  process.stderr.write(`redis-auth: the run-user checks are skipped: ${runUserSkip}\n`);
}

/**
 * A connection with no credentials at all, through doctor's anonymous probe; resolves what PING answers
 * (or the error the connection failed with).
 */
async function anonymousPing(url: string, tlsCaFile?: string): Promise<string> {
  const settings = { redisUrl: url, redisAuth: { tlsCaFile, embeddedPasswordFile: '/nonexistent/password' } };
  const client = createProbeRedis(settings, 5000, { anonymous: true });
  try {
    await connectProbe(client);
    return await client.ping();
  } catch (error) {
    return String(error);
  } finally {
    client.disconnect();
  }
}

/** A redis-server of the test's own; resolves once it logs that it accepts connections. */
async function startOwnRedis(args: string[]): Promise<ChildProcess> {
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${log}`)), 10_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      log += chunk.toString();
      if (log.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', () => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited:\n${log}`));
    });
  });
  return child;
}

async function stopOwnRedis(child: ChildProcess | undefined): Promise<void> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null || child.pid === undefined)
    return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  process.kill(child.pid, 'SIGKILL');
  await exited;
}

/**
 * A run goes through every kind of connection: the inbox and turn queue (the command), the approval
 * card's decision store and control queue (the click), the notify queue (the card's edit), the monitor's
 * queue and worker (the run's end).
 */
async function approvedRunCompletes(shepherd: TestApp, script: string, name: string) {
  const threadId = await shepherd.mention(`run ${script} --gpus 0 --name ${name}`, 'alice');
  const messages = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, name).length > 0);
  const card = cardsTitled(messages, name)[0];
  const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
  expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);
  await shepherd.waitForMessages(threadId, (all) =>
    botMessages(all).some((message) => message.card?.resolved?.startsWith('Approved by bob') === true),
  );
  await expect
    .poll(async () => (await shepherd.app.features.runs.find(name)).status, { timeout: 30_000 })
    .toBe('completed');
  return shepherd.app.features.runs.find(name);
}

const logger = createLogger('silent');
const appEnvironment = {
  SHEPHERD_APPROVERS: 'bob',
  SHEPHERD_MONITOR_INTERVAL_S: '0.25',
  SHEPHERD_GPUS: '1',
};

describe('the embedded Redis requires a password only the bot can read', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-redis-auth-'));
  const workspace = mkdtempSync(join(tmpdir(), 'shepherd-redis-auth-ws-'));
  let embedded: Awaited<ReturnType<typeof ensureRedis>> | undefined;
  let shepherd: TestApp | undefined;

  afterAll(async () => {
    await shepherd?.stop();
    await embedded?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(workspace, { recursive: true, force: true });
  });

  it('generates it at first start (0600), refuses anonymous connections, and a run cannot read it', async () => {
    // As in a real set-up, the run user can traverse the data directory to reach its run directories.
    chmodSync(dataDir, 0o755);
    chmodSync(workspace, 0o755);
    const port = await freePort();
    const url = `redis://127.0.0.1:${port}`;
    const config = loadConfig({ REDIS_URL: url, SHEPHERD_DATA_DIR: dataDir });
    const passwordFile = join(dataDir, 'redis', 'password');
    expect(config.redisAuth.embeddedPasswordFile).toBe(passwordFile);
    embedded = await ensureRedis(config, { logger });
    expect(embedded.pid).toBeGreaterThan(0);

    const password = readFileSync(passwordFile, 'utf8').trim();
    expect(password).toMatch(/^[0-9a-f]{64}$/);
    expect(statSync(passwordFile).mode & 0o777).toBe(0o600);
    expect(statSync(dirname(passwordFile)).mode & 0o777).toBe(0o700);
    expect(await anonymousPing(url)).toMatch(/NOAUTH/);
    // It came on stdin: not in redis-server's arguments, which every local user can read.
    expect(readFileSync(`/proc/${embedded.pid}/cmdline`, 'utf8')).not.toContain(password);

    // The bot and doctor read it from the data directory.
    const doctor = await checkRedis(config);
    expect(doctor.find((result) => result.name === 'redis')?.status).toBe('ok');
    expect(doctor.find((result) => result.name === 'redis auth')).toMatchObject({ status: 'ok' });

    writeFileSync(
      join(workspace, 'reach_redis.py'),
      `import errno, os, socket, shepherd
try:
    open(${JSON.stringify(passwordFile)}).read()
    print("password: read", flush=True)
except OSError as error:
    print("password: %s" % errno.errorcode[error.errno], flush=True)
connection = socket.create_connection(("127.0.0.1", ${port}), timeout=5)
connection.sendall(b"PING\\r\\n")
print("redis: %s uid=%d" % (connection.recv(200).decode().strip(), os.getuid()), flush=True)
shepherd.log_metrics(step=1, loss=1.0)
shepherd.finish()
`,
    );
    shepherd = await startTestApp({
      dataDir,
      environment: {
        ...appEnvironment,
        REDIS_URL: url,
        SHEPHERD_WORKSPACE: workspace,
        ...(runUserSkip === undefined ? { SHEPHERD_RUN_AS_USER: RUN_USER } : {}),
      },
    });
    const run = await approvedRunCompletes(shepherd, 'reach_redis.py', 'reach-redis');
    const output = readFileSync(join(dataDir, 'runs', run.id, 'output.log'), 'utf8');
    expect(output).toMatch(/^redis: -NOAUTH Authentication required\. uid=\d+$/m);
    if (runUserSkip === undefined) expect(output).toMatch(/^password: EACCES$/m);

    // A restart keeps the password (and so the data): the file is read, not made again.
    await shepherd.stop();
    shepherd = undefined;
    await embedded.stop();
    embedded = await ensureRedis(config, { logger });
    expect(readFileSync(passwordFile, 'utf8').trim()).toBe(password);
    expect(await anonymousPing(url)).toMatch(/NOAUTH/);
  }, 90_000);
});

describe('an external Redis with an ACL user or TLS', () => {
  let server: ChildProcess | undefined;
  let shepherd: TestApp | undefined;
  const directory = mkdtempSync(join(tmpdir(), 'shepherd-redis-tls-'));

  afterEach(async () => {
    await shepherd?.stop();
    shepherd = undefined;
    await stopOwnRedis(server);
    server = undefined;
  });
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  it('an ACL user limited to the prefix, with the default user off, carries an approved run', async () => {
    const port = await freePort();
    const prefix = uniquePrefix('acl');
    server = await startOwnRedis([
      ...['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      ...['--user', 'default', 'off'],
      // Keys and channels under the prefix only; no FLUSHALL, KEYS, CONFIG, DEBUG and the like.
      ...[
        '--user',
        'shepherd',
        'on',
        '>acl-pass-0026',
        `~${prefix}:*`,
        '&*',
        '+@all',
        '-@dangerous',
        '+info',
      ],
    ]);
    const url = `redis://shepherd:acl-pass-0026@127.0.0.1:${port}`;
    expect(await anonymousPing(`redis://127.0.0.1:${port}`)).toMatch(/NOAUTH/);
    shepherd = await startTestApp({
      prefix,
      environment: { ...appEnvironment, REDIS_URL: url, SHEPHERD_WORKSPACE: process.cwd() },
      overrides: { runEnvironment: { ...process.env, HEALTHY_STEPS: '3', HEALTHY_SLEEP: '0.01' } },
    });
    await approvedRunCompletes(shepherd, 'test/fixtures/healthy_train.py', 'acl-run');
    const doctor = await checkRedis(shepherd.config);
    expect(doctor.find((result) => result.name === 'redis')?.status).toBe('ok');
    expect(doctor.find((result) => result.name === 'redis auth')?.status).toBe('ok');
  }, 90_000);

  it('rediss:// with REDIS_TLS_CA_FILE carries an approved run; without the CA it does not connect', async () => {
    const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: directory, stdio: 'ignore' });
    openssl(
      ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem'],
      ...['-days', '1', '-subj', '/CN=shepherd-test-ca'],
    );
    writeFileSync(join(directory, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
    openssl(
      ...['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr'],
      ...['-subj', '/CN=localhost'],
    );
    openssl(
      ...['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial'],
      ...['-out', 'server.pem', '-days', '1', '-extfile', 'server.ext'],
    );
    const port = await freePort();
    server = await startOwnRedis([
      ...[
        '--port',
        '0',
        '--tls-port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
      ],
      ...['--tls-cert-file', join(directory, 'server.pem'), '--tls-key-file', join(directory, 'server.key')],
      ...['--tls-ca-cert-file', join(directory, 'ca.pem'), '--tls-auth-clients', 'no'],
      ...['--requirepass', 'tls-pass-0026'],
    ]);
    const url = `rediss://:tls-pass-0026@127.0.0.1:${port}`;
    const caFile = join(directory, 'ca.pem');
    expect(await anonymousPing(`rediss://127.0.0.1:${port}`, caFile)).toMatch(/NOAUTH/);

    const withoutCa = await checkRedis(loadConfig({ REDIS_URL: url }));
    expect(withoutCa.find((result) => result.name === 'redis')).toMatchObject({ status: 'fail' });
    expect(withoutCa[0]?.detail).toMatch(/certificate/);
    // doctor prints the URL without its password.
    expect(withoutCa[0]?.detail).not.toContain('tls-pass-0026');

    shepherd = await startTestApp({
      environment: {
        ...appEnvironment,
        REDIS_URL: url,
        REDIS_TLS_CA_FILE: caFile,
        SHEPHERD_WORKSPACE: process.cwd(),
      },
      overrides: { runEnvironment: { ...process.env, HEALTHY_STEPS: '3', HEALTHY_SLEEP: '0.01' } },
    });
    await approvedRunCompletes(shepherd, 'test/fixtures/healthy_train.py', 'tls-run');
    const doctor = await checkRedis(shepherd.config);
    expect(doctor.find((result) => result.name === 'redis')?.status).toBe('ok');
    expect(doctor.find((result) => result.name === 'redis auth')?.status).toBe('ok');
  }, 90_000);

  it('a wrong or missing password is named as such at start-up, in doctor and in the CLI', async () => {
    const port = await freePort();
    server = await startOwnRedis([
      ...['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      ...['--requirepass', 'right-pass-0026'],
    ]);
    const wrongUrl = `redis://:wrong-pass-0026@127.0.0.1:${port}`;
    const wrong = loadConfig({ REDIS_URL: wrongUrl });
    const startUp: unknown = await ensureRedis(wrong, { logger }).then(
      () => 'started',
      (error: unknown) => error,
    );
    expect(String(startUp)).toMatch(
      /refuses the bot's credentials \(WRONGPASS .*check the user and password in REDIS_URL/,
    );
    expect(String(startUp)).not.toContain('wrong-pass-0026');
    const doctor = await checkRedis(wrong);
    expect(doctor[0]).toMatchObject({ name: 'redis', status: 'fail' });
    expect(doctor[0]?.detail).toMatch(/WRONGPASS/);
    expect(doctor[0]?.fix).toMatch(/refused the credentials/);

    // No password at all on a local URL: Redis answers NOAUTH, and start-up says so instead of starting a
    // second redis-server on a port that is taken.
    const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-no-password-'));
    try {
      const missing = loadConfig({ REDIS_URL: `redis://127.0.0.1:${port}`, SHEPHERD_DATA_DIR: dataDir });
      await expect(ensureRedis(missing, { logger })).rejects.toThrow(
        /refuses the bot's credentials \(NOAUTH .*set them in REDIS_URL/,
      );
      const errors: string[] = [];
      const code = await main(
        ['runs'],
        { REDIS_URL: wrongUrl, SHEPHERD_DATA_DIR: dataDir },
        {
          out: () => undefined,
          error: (text) => errors.push(text),
        },
      );
      expect(code).toBe(1);
      expect(errors.join('')).toMatch(/refuses the credentials \(WRONGPASS/);
      expect(errors.join('')).not.toContain('wrong-pass-0026');
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 30_000);

  it('refuses REDIS_TLS_CA_FILE without a rediss:// URL', () => {
    expect(() =>
      loadConfig({ REDIS_URL: 'redis://127.0.0.1:6379', REDIS_TLS_CA_FILE: '/tmp/ca.pem' }),
    ).toThrow(/REDIS_TLS_CA_FILE="\/tmp\/ca.pem": set only with a rediss:\/\/ REDIS_URL/);
  });
});
