/**
 * Issue 26 item 1: the CPU pre-flight runs agent-written code before anyone approves it, so it runs as
 * the run user (`SHEPHERD_RUN_AS_USER`), without network where `unshare --net` works, and not at all when
 * the bot is root and no run user is set. Needs root (and the `shepherd-runner` user, created when
 * missing); skipped with a message otherwise.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lookupRunUser } from '../../src/runs/run-as-user.js';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { ensureRunUser, RUN_USER } from '../helpers/run-user.js';

const skipReason = ensureRunUser();
if (skipReason !== undefined) process.stderr.write(`pre-flight isolation tests skipped: ${skipReason}\n`);
// Probed the way the bot probes it (as root, unshare drops to the run user after leaving the network).
const unshareWorks =
  skipReason === undefined && spawnSync('unshare', ['--net', '--', 'true'], { stdio: 'ignore' }).status === 0;

/** Prints who it runs as and whether the test's HTTP server is reachable, leaves a marker, then fails. */
function probeScript(port: number, marker: string): string {
  return `import os, socket, sys
open(${JSON.stringify(marker)}, "w").close()
print("uid=%d gid=%d groups=%s" % (os.getuid(), os.getgid(), ",".join(str(g) for g in sorted(os.getgroups())) or "none"), flush=True)
try:
    socket.create_connection(("127.0.0.1", ${port}), timeout=3).close()
    print("network: connected", flush=True)
except OSError as error:
    print("network: %s errno=%s" % (type(error).__name__, error.errno), flush=True)
sys.exit(3)
`;
}

describe.skipIf(skipReason !== undefined)('the pre-flight never runs agent code as the bot', () => {
  let server: Server;
  let requests = 0;
  let port = 0;
  let workspace: string;
  const apps: TestApp[] = [];

  beforeAll(async () => {
    server = createServer((_request, response) => {
      requests += 1;
      response.writeHead(200).end('reached');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-pf-iso-'));
    // The marker is written by the pre-flight as the run user: the workspace is open to it.
    chmodSync(workspace, 0o777);
    writeFileSync(join(workspace, 'probe.py'), probeScript(port, join(workspace, 'ran-uid')));
    writeFileSync(join(workspace, 'refused.py'), probeScript(port, join(workspace, 'ran-refused')));
  });
  afterAll(async () => {
    for (const app of apps) await app.stop();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(workspace, { recursive: true, force: true });
  });

  const start = async (environment: Record<string, string>) => {
    const app = await startTestApp({
      environment: {
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_PREFLIGHT_STEPS: '3',
        SHEPHERD_PREFLIGHT_TIMEOUT_S: '20',
        ...environment,
      },
    });
    apps.push(app);
    return app;
  };

  it('runs as the run user, with no network where unshare works, and the card says so', async () => {
    const user = lookupRunUser(RUN_USER);
    const shepherd = await start({ SHEPHERD_RUN_AS_USER: RUN_USER });
    const threadId = await shepherd.mention('run probe.py --gpus 0 --name pf-uid', 'alice');
    const messages = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'pf-uid').length > 0);
    const text = cardsTitled(messages, 'pf-uid')[0]?.card?.text ?? '';
    const sandbox = unshareWorks ? `as ${RUN_USER}, no network` : `as ${RUN_USER}`;
    expect(text).toContain(`pre-flight FAILED on CPU (${sandbox}): the script exited with code 3`);
    // The card shows the pre-flight's output, then the script itself: read only the output.
    const output = /```\n([\s\S]*?)\n```/.exec(text)?.[1] ?? '';
    expect(output).toContain(`uid=${user.uid} gid=${user.gid} groups=`);
    // No supplementary group of the bot's (root's group 0) comes along.
    expect(/groups=([^\n]*)/.exec(output)?.[1]?.split(',')).not.toContain('0');
    if (unshareWorks) {
      // ENETUNREACH: the namespace's only interface, loopback, is down.
      expect(output).toMatch(/^network: OSError errno=101$/m);
      expect(requests).toBe(0);
      expect(text).toContain('It had no network');
    }
    expect(
      botMessages(messages).some(
        (message) => message.text === 'Running a short CPU pre-flight of pf-uid before the approval card…',
      ),
    ).toBe(true);
  });

  it('is refused with a clear line when the bot is root and no run user is set', async () => {
    expect(process.getuid?.()).toBe(0);
    const shepherd = await start({});
    const threadId = await shepherd.mention('run refused.py --gpus 0 --name pf-refused', 'alice');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'pf-refused').length > 0,
    );
    const card = cardsTitled(messages, 'pf-refused')[0];
    expect(card?.card?.text).toContain(
      'pre-flight refused: the bot runs as root and SHEPHERD_RUN_AS_USER is not set, so this unapproved script was not run.',
    );
    // Approve stays: the refusal withholds the check, not the run.
    expect(card?.card?.actions?.map((action) => action.label)).toEqual(['Approve', 'Reject', 'Edit']);
    expect(existsSync(join(workspace, 'ran-refused'))).toBe(false);
    expect(
      botMessages(messages).some((message) => message.text.startsWith('Running a short CPU pre-flight')),
    ).toBe(false);
  });
});
