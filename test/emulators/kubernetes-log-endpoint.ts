import type { ServerResponse } from 'node:http';
import type { Kubelet, LogEntry } from './kubernetes-kubelet.js';
import { statusBody, type WirePod } from './kubernetes-objects.js';

/*
 * GET /api/v1/namespaces/{ns}/pods/{name}/log, as the kubelet serves it through the API server
 * (core/v1 PodLogOptions: container, follow, timestamps, sinceTime, sinceSeconds, tailLines, limitBytes).
 * `timestamps=true` prefixes each line with its RFC 3339 nanosecond time and a space; `sinceTime` keeps
 * lines stamped at or after it; `follow=true` keeps the chunked response open and sends lines as the
 * container prints them, ending when the container ends. A container that has not started is a 400.
 */

/** `2024-05-01T12:00:00.12Z` → comparable fixed-width key (nanoseconds). */
function timeKey(text: string): string {
  const match = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?Z$/.exec(text);
  if (match !== null) return `${match[1]}.${(match[2] ?? '').padEnd(9, '0')}`;
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? '' : `${date.toISOString().slice(0, 19)}.${'0'.repeat(9)}`;
}

function render(entry: LogEntry, timestamps: boolean): string {
  return `${timestamps ? `${entry.timestamp} ` : ''}${entry.text}${entry.newline ? '\n' : ''}`;
}

export interface LogStreams {
  /** Responses of open follow streams, so a test can cut them (a broken connection). */
  open: Set<ServerResponse>;
}

export function serveLog(
  response: ServerResponse,
  pod: WirePod,
  query: URLSearchParams,
  kubelet: Kubelet,
  streams: LogStreams,
): void {
  const name = pod.metadata.name ?? '';
  const namespace = pod.metadata.namespace ?? '';
  const containerName = query.get('container') ?? pod.spec.containers[0]?.name ?? '';
  const send = (code: number, body: Record<string, unknown>) => {
    response.writeHead(code, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
  };
  if (!pod.spec.containers.some((container) => container.name === containerName)) {
    send(400, statusBody(400, 'BadRequest', `container ${containerName} is not valid for pod ${name}`));
    return;
  }
  const state = pod.status?.containerStatuses?.find((status) => status.name === containerName)?.state;
  const runtime = kubelet.runtime(namespace, name);
  if (runtime === undefined || (state?.running === undefined && state?.terminated === undefined)) {
    const waiting = state?.waiting?.reason;
    const why =
      waiting === 'ImagePullBackOff' || waiting === 'ErrImagePull'
        ? 'trying and failing to pull image'
        : (waiting ?? 'ContainerCreating');
    send(
      400,
      statusBody(
        400,
        'BadRequest',
        `container "${containerName}" in pod "${name}" is waiting to start: ${why}`,
      ),
    );
    return;
  }
  const timestamps = query.get('timestamps') === 'true';
  const sinceTime = query.get('sinceTime');
  const sinceSeconds = query.get('sinceSeconds');
  const since =
    sinceTime !== null
      ? timeKey(sinceTime)
      : sinceSeconds !== null
        ? timeKey(new Date(Date.now() - Number(sinceSeconds) * 1000).toISOString())
        : '';
  const tail = query.get('tailLines');
  const selected = runtime.log.filter((entry) => since === '' || timeKey(entry.timestamp) >= since);
  const first = tail === null ? selected : selected.slice(Math.max(0, selected.length - Number(tail)));
  response.writeHead(200, { 'content-type': 'text/plain', 'transfer-encoding': 'chunked' });
  for (const entry of first) response.write(render(entry, timestamps));
  let sent = runtime.log.length;
  if (query.get('follow') !== 'true' || runtime.ended) {
    response.end();
    return;
  }
  streams.open.add(response);
  const listener = () => {
    for (const entry of runtime.log.slice(sent)) response.write(render(entry, timestamps));
    sent = runtime.log.length;
    if (runtime.ended) finish();
  };
  const finish = () => {
    runtime.listeners.delete(listener);
    streams.open.delete(response);
    if (!response.writableEnded) response.end();
  };
  runtime.listeners.add(listener);
  response.on('close', finish);
}
