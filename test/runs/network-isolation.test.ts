/**
 * `unshare --net` for the pre-flight (issue 26 item 1): the prefix is tried once per user and kept; a
 * command under it cannot reach a server on this host's loopback. Where unshare does not work here, the
 * answer is "no isolation" (undefined), which the card then does not claim.
 */
import { execFile, spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNetworkIsolation } from '../../src/runs/network-isolation.js';

const botUid = process.getuid?.();

/** Runs `python3 -c` under the prefix: "connected" or the errno of the failed connect. */
function connectUnder(prefix: string[], port: number): Promise<string> {
  const [command = 'python3', ...rest] = [...prefix, 'python3'];
  const code = `import socket
try:
    socket.create_connection(("127.0.0.1", ${port}), timeout=3).close(); print("connected")
except OSError as error:
    print("errno=%s" % error.errno)`;
  return new Promise((resolve) => {
    execFile(command, [...rest, '-c', code], { timeout: 10_000 }, (_error, stdout) => resolve(stdout.trim()));
  });
}

describe('network isolation for the pre-flight', () => {
  let server: Server;
  let port = 0;
  beforeAll(async () => {
    server = createServer((_request, response) => response.writeHead(200).end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('gives the same answer from one probe, and a command under it reaches nothing', async () => {
    const isolation = createNetworkIsolation({ botUid });
    const first = isolation.prefix(undefined);
    expect(isolation.prefix(undefined)).toBe(first);
    const prefix = await first;
    const works = spawnSync('unshare', ['--net', '--', 'true'], { stdio: 'ignore' }).status === 0;
    if (botUid === 0) expect(prefix !== undefined).toBe(works);
    if (prefix === undefined) {
      process.stderr.write(
        'network-isolation: unshare --net does not work here; only the probe was checked\n',
      );
      return;
    }
    expect(prefix.slice(0, 2)).toEqual(['unshare', '--net']);
    // The control: without the prefix the server answers.
    expect(await connectUnder([], port)).toBe('connected');
    expect(await connectUnder(prefix, port)).toBe('errno=101');
  });

  it('a non-root bot: its prefix uses a user namespace and has no network either', async () => {
    const prefix = await createNetworkIsolation({ botUid: 1000 }).prefix(undefined);
    if (prefix === undefined) {
      process.stderr.write(
        'network-isolation: no user namespaces here; the non-root path was not exercised\n',
      );
      return;
    }
    expect(prefix).toContain('--net');
    expect(prefix.some((word) => word === '--map-current-user' || word === '--map-root-user')).toBe(true);
    expect(await connectUnder(prefix, port)).toBe('errno=101');
  });
});
