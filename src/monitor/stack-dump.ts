/**
 * Parsing hang dumps out of output.log: `faulthandler`'s (the helper, on SIGUSR2) and `py-spy dump`'s
 * (scripts without the helper). Pure: the monitor collects the log lines after it asked for a dump and
 * these functions find the threads, the main thread and its innermost frames.
 *
 * faulthandler:                                     py-spy:
 *   Thread 0x00007f… (most recent call first):        Thread 4242 (idle): "MainThread"
 *     File "train.py", line 12 in all_reduce              all_reduce (train.py:12)
 *   Current thread 0x00007f… (most recent call first):
 */

interface StackFrame {
  function: string;
  file: string;
  line: number;
}

interface ThreadStack {
  /** The header line as printed ("Current thread 0x… (most recent call first):"). */
  header: string;
  /** py-spy's thread name ("MainThread"), when it printed one. */
  name?: string;
  /** faulthandler's "Current thread": the thread that ran the signal handler. */
  current: boolean;
  /** Innermost first. */
  frames: StackFrame[];
}

const FAULT_HEADER = /^(Current thread|Thread) 0x[0-9a-fA-F]+ .*\(most recent call first\):\s*$/;
const FAULT_FRAME = /^\s+File "(.+)", line (\d+) in (.+?)\s*$/;
const SPY_HEADER = /^Thread (?:0x[0-9a-fA-F]+|\d+) \(\w+\)(?:: "(.*)")?\s*$/;
const SPY_FRAME = /^\s+(\S.*?) \((.+):(\d+)\)\s*$/;

/** Every thread stack in the text, in the order printed. */
export function parseStackDump(text: string): ThreadStack[] {
  const threads: ThreadStack[] = [];
  let open: ThreadStack | undefined;
  for (const line of text.split('\n')) {
    const fault = FAULT_HEADER.exec(line);
    const spy = fault === null ? SPY_HEADER.exec(line) : null;
    if (fault !== null || spy !== null) {
      open = { header: line.trim(), current: fault?.[1] === 'Current thread', frames: [] };
      if (spy?.[1] !== undefined) open.name = spy[1];
      threads.push(open);
      continue;
    }
    if (open === undefined) continue;
    const frame = FAULT_FRAME.exec(line);
    if (frame !== null) {
      open.frames.push({ file: frame[1] ?? '', line: Number(frame[2]), function: frame[3] ?? '' });
      continue;
    }
    const spyFrame = SPY_FRAME.exec(line);
    if (spyFrame !== null) {
      open.frames.push({ function: spyFrame[1] ?? '', file: spyFrame[2] ?? '', line: Number(spyFrame[3]) });
      continue;
    }
    // py-spy may print locals or idle markers under a frame; anything unindented ends the thread.
    if (!/^\s/.test(line)) open = undefined;
  }
  return threads;
}

/**
 * The main thread: py-spy names it; faulthandler does not, but the main thread's outermost frame is the
 * script's `<module>` (other threads start in threading's `_bootstrap`). Else the thread that ran the
 * handler, which for a process-directed signal is usually the main one.
 */
export function mainThreadOf(threads: readonly ThreadStack[]): ThreadStack | undefined {
  return (
    threads.find((thread) => thread.name === 'MainThread') ??
    threads.find((thread) => thread.frames.at(-1)?.function === '<module>') ??
    threads.find((thread) => thread.current) ??
    threads[0]
  );
}

const baseName = (file: string) => file.split('/').at(-1) ?? file;

/** "all_reduce (train.py:12) ← step (train.py:30)": the innermost frames, innermost first. */
export function describeFrames(thread: ThreadStack, count = 3): string {
  return thread.frames
    .slice(0, count)
    .map((frame) => `${frame.function} (${baseName(frame.file)}:${frame.line})`)
    .join(' ← ');
}

/** The dump as one text (every thread), cut to `maxChars` from the end of the last thread. */
export function renderStackDump(threads: readonly ThreadStack[], maxChars = 12_000): string {
  const text = threads
    .map((thread) =>
      [
        thread.header,
        ...thread.frames.map((frame) => `  File "${frame.file}", line ${frame.line} in ${frame.function}`),
      ].join('\n'),
    )
    .join('\n\n');
  return text.length <= maxChars ? text : `${text.slice(0, maxChars)}\n… (cut)`;
}
