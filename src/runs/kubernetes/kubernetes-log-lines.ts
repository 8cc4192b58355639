/**
 * Which lines of a pod log (read with `timestamps=true`) are new. The kubelet prefixes each line with its
 * RFC 3339 time in nanoseconds; the cursor remembers the last written line's time and how many lines
 * carried that exact time, so a reconnect (asking from that second on) skips exactly what was written.
 */

export interface LogCursor {
  /** The pod the cursor belongs to; a new pod's log starts over. */
  podUid: string;
  /** Timestamp of the last line written, as the kubelet sent it. */
  since?: string | undefined;
  /** Lines written with exactly that timestamp. */
  sameCount: number;
}

/** `2024-05-01T12:00:00.12Z` → `2024-05-01T12:00:00.120000000`: fixed width, so keys compare as strings. */
export function timestampKey(timestamp: string): string | undefined {
  const match = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(timestamp);
  if (match === null) return undefined;
  const [, seconds = '', fraction = '', zone] = match;
  if (zone === 'Z') return `${seconds}.${fraction.padEnd(9, '0')}`;
  // Another offset (not what the kubelet writes): normalise through Date, keeping milliseconds.
  const date = new Date(`${seconds}${fraction === '' ? '' : `.${fraction.slice(0, 3)}`}${zone}`);
  if (Number.isNaN(date.getTime())) return undefined;
  return `${date.toISOString().slice(0, 19)}.${fraction.padEnd(9, '0').slice(0, 9)}`;
}

/** `sinceTime` for a reconnect: the cursor's second (servers differ on sub-second precision). */
export function sinceTimeOf(cursor: LogCursor | undefined): string | undefined {
  const key = cursor?.since === undefined ? undefined : timestampKey(cursor.since);
  return key === undefined ? undefined : `${key.slice(0, 19)}Z`;
}

/** A timestamped line split into its time and text; untimed text (a server without timestamps) has none. */
function splitTimestamp(line: string): { timestamp?: string; key?: string; text: string } {
  const space = line.indexOf(' ');
  const head = space === -1 ? line : line.slice(0, space);
  const key = timestampKey(head);
  if (key === undefined) return { text: line };
  return { timestamp: head, key, text: space === -1 ? '' : line.slice(space + 1) };
}

/**
 * A filter for one log stream: drops the lines up to `start` and returns the cursor after each batch.
 * Stateful across batches, since the lines at the cursor's timestamp may arrive split over chunks. Lines
 * without a timestamp are kept (they cannot be placed) and leave the cursor as it is.
 */
export function createLineFilter(start: LogCursor) {
  const startKey = start.since === undefined ? undefined : timestampKey(start.since);
  let skipped = 0;
  let cursor: LogCursor = { ...start };
  let cursorKey = startKey;
  return {
    take(lines: readonly string[]): { texts: string[]; cursor: LogCursor } {
      const texts: string[] = [];
      for (const line of lines) {
        const { timestamp, key, text } = splitTimestamp(line);
        if (key === undefined || timestamp === undefined) {
          texts.push(text);
          continue;
        }
        if (startKey !== undefined && key < startKey) continue;
        if (key === startKey && skipped < start.sameCount) {
          skipped += 1;
          continue;
        }
        texts.push(text);
        if (key === cursorKey) {
          cursor = { ...cursor, sameCount: cursor.sameCount + 1 };
        } else {
          cursor = { podUid: start.podUid, since: timestamp, sameCount: 1 };
          cursorKey = key;
        }
      }
      return { texts, cursor };
    },
  };
}
