import { connect, type Socket } from 'node:net';
import { TEST_REDIS_URL } from './redis.js';

/** A raw MONITOR connection (ioredis' own `monitor()` trips over its ready check on a busy server). */
export async function startMonitor(onCommand: (args: string[]) => void): Promise<Socket> {
  const url = new URL(TEST_REDIS_URL);
  const socket = connect(Number(url.port || 6379), url.hostname);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let buffered = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    const lines = buffered.split('\r\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      // `+1700000000.123 [0 127.0.0.1:5000] "evalsha" "abc" "1" …`
      // Commands a script runs show as `[0 lua]`; only what clients sent counts.
      if (!line.startsWith('+') || line === '+OK' || / lua\] /.test(line)) continue;
      const args = [...line.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((match) => match[1] ?? '');
      onCommand(args);
    }
  });
  socket.write('MONITOR\r\n');
  await new Promise((resolve) => setTimeout(resolve, 100));
  return socket;
}
