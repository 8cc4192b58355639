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
}

export interface StreamOutcome {
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
  onOpen: (controller: AbortController) => void;
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
        const written = await options.lease.append(texts, {
          launchKey: target.launchKey,
          header: target.header,
          cursor,
        });
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

  const take = (chunks: Buffer[]): Promise<void> => {
    lastData = Date.now();
    const text = partial + chunks.map((chunk) => decoder.write(chunk)).join('');
    const lines = text.split('\n');
    partial = lines.pop() ?? '';
    const { texts, cursor } = filter.take(lines);
    return appender.push(texts, cursor).then(() => {
      if (appender.outcome.lost) controller?.abort();
    });
  };
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      take([chunk]).then(() => callback(), callback);
    },
    writev(chunks, callback) {
      take(chunks.map((entry) => entry.chunk as Buffer)).then(() => callback(), callback);
    },
  });
  // `finish` when the response ended; `unpipe` when it broke off (client-node pipes without forwarding errors).
  const ended = new Promise<void>((resolve) => {
    for (const event of ['finish', 'unpipe', 'close', 'error']) sink.once(event, () => resolve());
  });
  const sinceTime = sinceTimeOf(start);
  try {
    controller = await options.api.streamLog(
      target.namespace,
      pod.metadata?.name ?? '',
      pod.spec?.containers[0]?.name ?? mainContainer(pod)?.name ?? '',
      sink,
      { follow: read.follow, timestamps: true, ...(sinceTime === undefined ? {} : { sinceTime }) },
    );
  } catch (error) {
    options.logger.debug({ err: error, pod: pod.metadata?.name }, 'pod log not readable yet');
    return appender.outcome;
  }
  options.onOpen(controller);
  const idle = setInterval(
    () => {
      if (Date.now() - lastData > options.idleReconnectMs) controller?.abort();
    },
    Math.min(options.idleReconnectMs, 5_000),
  );
  try {
    await ended;
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
