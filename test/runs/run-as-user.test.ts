/**
 * `SHEPHERD_RUN_AS_USER` (issue 10 item 6): when the bot runs as root, a training process starts as the
 * configured user, so it cannot read the bot's secrets files. Needs root and a user named
 * `shepherd-runner` (created with `useradd` when missing); skipped with a message otherwise.
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { lookupRunUser } from '../../src/runs/run-as-user.js';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { ensureRunUser, RUN_USER } from '../helpers/run-user.js';

const skipReason = ensureRunUser();
if (skipReason !== undefined) {
  // A clear line in the test output instead of a silent skip.
  process.stderr.write(`run-as-user tests skipped: ${skipReason}\n`);
}

describe('SHEPHERD_RUN_AS_USER', () => {
  it('refuses an unknown user, root itself, and a non-root bot switching users', () => {
    expect(() => lookupRunUser('no-such-user-4f2a')).toThrow(ConfigError);
    expect(() => lookupRunUser('root')).toThrow(/must not be root/);
    expect(() => lookupRunUser('nobody', 1000)).toThrow(/only a bot running as root/);
    expect(lookupRunUser('nobody', 0)).toMatchObject({ name: 'nobody', uid: 65534 });
  });
});

describe.skipIf(skipReason !== undefined)('SHEPHERD_RUN_AS_USER as root (real process)', () => {
  let shepherd: TestApp;
  let workspace: string;
  let dataDir: string;
  const secretsFile = join(tmpdir(), `shepherd-bot-secret-${process.pid}`);

  beforeAll(async () => {
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-runas-ws-'));
    dataDir = mkdtempSync(join(tmpdir(), 'shepherd-runas-data-'));
    // The run user must be able to reach its run directory; the bot's secret file stays root-only.
    chmodSync(dataDir, 0o755);
    chmodSync(workspace, 0o755);
    writeFileSync(secretsFile, 'bot-secret-value-0006\n', { mode: 0o600 });
    writeFileSync(
      join(workspace, 'whoami.py'),
      `import os, shepherd
print("uid=%d gid=%d user=%s" % (os.getuid(), os.getgid(), os.environ.get("USER")), flush=True)
try:
    open(${JSON.stringify(secretsFile)}).read()
    print("secret: readable", flush=True)
except PermissionError:
    print("secret: denied", flush=True)
shepherd.log_metrics(step=1, loss=1.0)
shepherd.finish()
`,
    );
    shepherd = await startTestApp({
      dataDir,
      environment: {
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_RUN_AS_USER: RUN_USER,
        SHEPHERD_APPROVERS: 'bob',
        SHEPHERD_MONITOR_INTERVAL_S: '0.25',
      },
    });
  });
  afterAll(async () => {
    await shepherd?.stop();
    rmSync(workspace, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(secretsFile, { force: true });
  });

  it('starts the training process as that user, which cannot read the bot’s secrets', async () => {
    const expected = lookupRunUser(RUN_USER);
    const threadId = await shepherd.mention('run whoami.py --gpus 0', 'alice');
    const messages = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'whoami').length > 0);
    const card = cardsTitled(messages, 'whoami')[0];
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);
    await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.card?.title === 'whoami finished'),
      30_000,
    );
    const run = await shepherd.app.features.runs.find('whoami');
    const log = join(dataDir, 'runs', run.id, 'output.log');
    expect(existsSync(log)).toBe(true);
    const text = readFileSync(log, 'utf8');
    expect(text).toContain(`uid=${expected.uid} gid=${expected.gid} user=${RUN_USER}`);
    expect(text).toContain('secret: denied');
  });
});
