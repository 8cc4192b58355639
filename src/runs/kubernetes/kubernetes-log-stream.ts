import { Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../../logger.js';
import type { KubernetesApi } from './kubernetes-api.js';
import { createLineFilter, type LogCursor, sinceTimeOf } from './kubernetes-log-lines.js';
import type { LogLease } from './kubernetes-log-state.js';
import { mainContainer } from './kubernetes-states.js';

/**
 * One read of a pod's log into output.log: a `follow` stream while the container runs, or a plain read of
 * what is there. Lines are filtered against the cursor, appended by the lease holder in batches (each
 * `writev` is one batch), and the cursor moves with them.
 */

export interface StreamTarget {
  namespace: string;
  launchKey: string;
  header: string;
  /**
   * The pod's files are not the run directory's (no shared volume): the helper's printed
   * `[metrics] {...}` lines go to the run's metrics.jsonl, as the helper would have written them.
   */
  metricsFromLog: boolean;
}

const HELPER_METRICS = '[metrics] {';

interface StreamOutcome {
  /** Lines appended. */
  lines: number;
  /** The lease went to another follower: stop. */
  lost: boolean;
}

interface StreamOptions {
  api: Pick<KubernetesApi, 'streamLog'>;
  lease: LogLease;
  logger: Logger;
  /** Abort a follow stream that brought nothing for this long (a connection that died silently). */
  idleReconnectMs: number;
  /** Called with the stream's abort handle, so a stop can end it. */
  onOpen: (stream: { abort(): void }) => void;
}

/** Serialises the appends of one stream (a write waits for the one before it). */
function createAppender(options: StreamOptions, target: StreamTarget) {
  let chain: Promise<unknown> = Promise.resolve();
  const outcome: StreamOutcome = { lines: 0, lost: false };
  return {
    outcome,
    push(texts: string[], cursor: LogCursor): Promise<void> {
      const next = chain.then(async () => {
        if (outcome.lost || texts.length === 0) return;
        const metrics = target.metricsFromLog ? texts.filter((text) => text.startsWith(HELPER_METRICS)) : [];
        const printed =
          metrics.length === 0 ? texts : texts.filter((text) => !text.startsWith(HELPER_METRICS));
        const covers = { launchKey: target.launchKey, header: target.header, cursor };
        const written = await options.lease.append(
          printed,
          covers,
          metrics.map((text) => text.slice(HELPER_METRICS.length - 1)),
        );
        if (written) outcome.lines += texts.length;
        else outcome.lost = true;
      });
      chain = next.catch(() => undefined);
      return next;
    },
    settled: () => chain,
  };
}

/**
 * A Writable for client-node's `Log` to pipe into, and a promise that settles when the stream is over.
 * `Log` pipes the response body without passing its errors on, so a broken connection is seen on the body
 * itself, which the `pipe` event hands over. Once a stream broke off (or `stop` was called: abort, idle,
 * lost lease) chunks still buffered in the Writable are dropped: the cursor does not cover them, so the
 * next read brings them again, and appending them now could race that read.
 */
function createSink(take: (chunks: Buffer[]) => Promise<void>) {
  let closed = false;
  let settle: () => void = () => undefined;
  const ended = new Promise<void>((resolve) => {
    settle = resolve;
  });
  const breakOff = () => {
    closed = true;
    settle();
  };
  const accept = (chunks: Buffer[], callback: (error?: Error | null) => void) => {
    if (closed) callback();
    else take(chunks).then(() => callback(), callback);
  };
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      accept([chunk], callback);
    },
    writev(chunks, callback) {
      accept(
        chunks.map((entry) => entry.chunk as Buffer),
        callback,
      );
    },
  });
  // A complete response: `finish` comes after every buffered chunk was taken.
  sink.once('finish', () => settle());
  sink.once('error', breakOff);
  sink.once('pipe', (source: NodeJS.ReadableStream) => {
    let complete = false;
    source.once('end', () => {
      complete = true;
    });
    source.once('error', breakOff);
    source.once('close', () => {
      if (!complete) breakOff();
    });
  });
  return { sink, ended, stop: breakOff };
}

/**
 * Read `pod`'s log from the lease's cursor on. `flushPartial`: the container has ended, so a last line
 * without a newline is final and is written too (otherwise it is left for the next read).
 */
export async function streamPodLog(
  options: StreamOptions,
  target: StreamTarget,
  pod: V1Pod,
  read: { follow: boolean; flushPartial: boolean },
): Promise<StreamOutcome> {
  const uid = pod.metadata?.uid ?? '';
  const held = await options.lease.held();
  if (held === undefined) return { lines: 0, lost: true };
  const start: LogCursor = held.cursor?.podUid === uid ? held.cursor : { podUid: uid, sameCount: 0 };
  const filter = createLineFilter(start);
  const appender = createAppender(options, target);
  const decoder = new StringDecoder('utf8');
  let partial = '';
  let lastData = Date.now();
  let controller: AbortController | undefined;
  const end = () => {
    controller?.abort();
    stream.stop();
  };
  const stream = createSink(async (chunks) => {
    lastData = Date.now();
    const lines = (partial + chunks.map((chunk) => decoder.write(chunk)).join('')).split('\n');
    partial = lines.pop() ?? '';
    const { texts, cursor } = filter.take(lines);
    await appender.push(texts, cursor);
    if (appender.outcome.lost) end();
  });
  const sinceTime = sinceTimeOf(start);
  try {
    controller = await options.api.streamLog(
      target.namespace,
      pod.metadata?.name ?? '',
      pod.spec?.containers[0]?.name ?? mainContainer(pod)?.name ?? '',
      stream.sink,
      { follow: read.follow, timestamps: true, ...(sinceTime === undefined ? {} : { sinceTime }) },
    );
  } catch (error) {
    options.logger.debug({ err: error, pod: pod.metadata?.name }, 'pod log not readable yet');
    return appender.outcome;
  }
  options.onOpen({ abort: end });
  const idle = setInterval(
    () => {
      if (Date.now() - lastData > options.idleReconnectMs) end();
    },
    Math.min(options.idleReconnectMs, 5_000),
  );
  try {
    await stream.ended;
    await appender.settled();
  } finally {
    clearInterval(idle);
  }
  if (read.flushPartial && partial !== '' && !appender.outcome.lost) {
    const { texts, cursor } = filter.take([partial + decoder.end()]);
    await appender.push(texts, cursor);
  }
  return appender.outcome;
}
