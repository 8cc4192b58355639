/**
 * The baseline for the ack benchmark: a bare `node:http` server that reads the request body and
 * answers 202 with a small JSON body, doing nothing else. Prints `port=N` once listening.
 * Run: node --import tsx bench/lib/bare-server.ts
 */
import { createServer } from 'node:http';

let counter = 0;
const server = createServer((request, response) => {
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
