/**
 * The baseline for the ack benchmark: a bare `node:http` server that reads the request body and
 * answers 202 with a small JSON body, doing nothing else. Prints `port=N` once listening. `GET /loop-delay`
 * answers its event-loop delay p99 since the previous such call.
 * Run: node --import tsx bench/lib/bare-server.ts
 */
import { createServer } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';

// The same measure Shepherd exposes, so the benchmark can tell the machine's stalls from Shepherd's.
const loopDelay = monitorEventLoopDelay({ resolution: 10 });
loopDelay.enable();

let counter = 0;
const server = createServer((request, response) => {
  if (request.method === 'GET' && request.url === '/loop-delay') {
    const p99 = loopDelay.percentile(99);
    loopDelay.reset();
    response.writeHead(200, { 'content-type': 'application/json' });
    // Like Shepherd's metric: the recorded interval minus the 10 ms resolution.
    response.end(JSON.stringify({ p99Ms: Number.isFinite(p99) ? Math.max(0, p99 / 1e6 - 10) : 0 }));
    return;
  }
  request.resume();
  request.on('end', () => {
    counter += 1;
    const payload = JSON.stringify({ threadId: `m${counter}`, messageId: `m${counter}` });
    response.writeHead(202, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(payload),
    });
    response.end(payload);
  });
});
server.listen(Number(process.env.PORT ?? '0'), '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`port=${typeof address === 'object' && address !== null ? address.port : 0}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
