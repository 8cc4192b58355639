import { stripVTControlCharacters } from 'node:util';
import { customPatternFormat } from './custom-pattern.js';
import { jsonLineFormat } from './json-line.js';
import { keyValueFormat } from './key-value.js';
import { pythonDictFormat } from './python-dict.js';
import type { StdoutFormat } from './types.js';

/**
 * Turns output.log text into metric points. Stateless per line except for the step: it comes from the
 * line when the line names one, else from the run's tqdm bar (`123/1000 [`, updated in place with `\r`),
 * else it is a running count after the last step. The state is plain JSON so the monitor persists it
 * between ticks next to the file cursor.
 */

/** The built-in formats, tried in this order; the first that reads a line wins. */
const DEFAULT_FORMATS: readonly StdoutFormat[] = [pythonDictFormat, jsonLineFormat, keyValueFormat];

interface StdoutPoint {
  step: number;
  metrics: Record<string, number>;
  /** Which format read it. */
  format: string;
}

export interface StdoutParseState {
  /** Last step given to a point or shown by the training bar. */
  lastStep?: number;
  /**
   * The training progress bar. Until a metric line has taken its step from it (`used`), the latest bar
   * seen is the candidate (dataset `Map`, download and loading bars come and go before training); after
   * that, bars with another total (evaluation, validation) are ignored. `offset` grows when the bar
   * restarts (a new epoch), so the step keeps increasing.
   */
  bar?: { n: number; total: number; offset: number; used: boolean };
  /** The training bar's total: the planned number of steps (per epoch for Lightning and Keras). */
  plannedSteps?: number;
  /** Metric lines read so far. */
  lines: number;
}

interface StdoutParseResult {
  points: StdoutPoint[];
  /** Step shown by the training bar after the last point, when it moved on without a metric line. */
  progressStep?: number;
}

export function createStdoutParseState(): StdoutParseState {
  return { lines: 0 };
}

/** The counter of the last bar `readBarCounter` found (one shared object: no allocation per line). */
const counter = { n: 0, total: 0 };

function isDigit(code: number): boolean {
  return code >= 48 && code <= 57;
}

/** The integer `text.slice(start, end)` holds, as Number() reads it (digits gathered while exact). */
function digitsValue(text: string, start: number, end: number): number {
  if (end - start > 15) return Number(text.slice(start, end));
  let value = 0;
  for (let index = start; index < end; index++) value = value * 10 + (text.charCodeAt(index) - 48);
  return value;
}

/**
 * Finds a bar's `123/1000 [` (tqdm: `| 123/1000 [00:12<01:30, 9.8it/s]`; Keras: `123/1000 [=====>....]`):
 * the first `/` with whole digit runs on both sides, not preceded by another `/`, and ` [` after it. By hand
 * rather than a regular expression: the match array and its strings were allocated for every bar line.
 */
function readBarCounter(segment: string): boolean {
  const length = segment.length;
  for (let slash = segment.indexOf('/'); slash !== -1; slash = segment.indexOf('/', slash + 1)) {
    let start = slash;
    while (start > 0 && isDigit(segment.charCodeAt(start - 1))) start--;
    if (start === slash || (start > 0 && segment.charCodeAt(start - 1) === 47)) continue;
    let end = slash + 1;
    while (end < length && isDigit(segment.charCodeAt(end))) end++;
    if (end === slash + 1 || end + 1 >= length) continue;
    if (segment.charCodeAt(end) !== 32 || segment.charCodeAt(end + 1) !== 91 /* [ */) continue;
    counter.n = digitsValue(segment, start, slash);
    counter.total = digitsValue(segment, slash + 1, end);
    return true;
  }
  return false;
}

const MAX_SEGMENT_CHARS = 16 * 1024;
/** The line the executor writes into output.log before each launch (`=== launch 2 at … ===`). */
const LAUNCH_HEADER = '=== launch ';

function isPadded(text: string): boolean {
  return text.charCodeAt(0) <= 32 || text.charCodeAt(text.length - 1) <= 32;
}

function hasAny(record: Record<string, number>): boolean {
  for (const _key in record) return true;
  return false;
}

function observeBar(state: StdoutParseState, segment: string): boolean {
  if (!readBarCounter(segment)) return false;
  const { n, total } = counter;
  if (!(total > 0) || n > total) return false;
  const bar = state.bar;
  if (bar === undefined || (total !== bar.total && !bar.used)) {
    state.bar = { n, total, offset: 0, used: false };
    state.plannedSteps = total;
    return true;
  }
  if (total !== bar.total) return false;
  // The same bar restarting (next epoch): keep the step increasing.
  if (n < bar.n) bar.offset += bar.total;
  bar.n = n;
  return true;
}

function barStep(state: StdoutParseState): number | undefined {
  return state.bar === undefined ? undefined : state.bar.offset + state.bar.n;
}

// What reading a segment did: nothing to the bar, moved the bar (no metric line), or read a metric line.
const UNCHANGED = 0;
const BAR_MOVED = 1;
const METRICS_READ = 2;

/** Whether the bar moved since the last metric line, after a segment with this outcome. */
function barMovedAfter(outcome: number, before: boolean): boolean {
  return outcome === UNCHANGED ? before : outcome === BAR_MOVED;
}

/**
 * Reads one `\r`-separated segment into `points`. A module function, not a closure per call: optimised
 * code that had inlined one call's closure deoptimised on the next call's (every batch, in the bench).
 */
function readSegment(
  raw: string,
  formats: readonly StdoutFormat[],
  state: StdoutParseState,
  points: StdoutPoint[],
): number {
  if (raw.length < 3 || raw.length > MAX_SEGMENT_CHARS) return UNCHANGED;
  const segment = isPadded(raw) ? raw.trim() : raw;
  if (segment.length < 3) return UNCHANGED;
  if (
    segment.charCodeAt(0) === 61 /* = */ &&
    segment.startsWith(LAUNCH_HEADER) &&
    !segment.includes(' ended')
  ) {
    // A relaunch (resume, fix): its progress bar starts afresh, maybe at the resumed step.
    delete state.bar;
    return UNCHANGED;
  }
  const barMoved = observeBar(state, segment);
  // Indexed loops here and in parseLines: the for-of iterator was not always optimised away, and then
  // allocated a result object per step.
  for (let index = 0; index < formats.length; index++) {
    const format = formats[index] as StdoutFormat;
    const parsed = format.parse(segment);
    if (parsed === undefined) continue;
    let step = parsed.step;
    if (step === undefined && state.bar !== undefined) {
      step = barStep(state);
      state.bar.used = true;
    }
    step ??= (state.lastStep ?? -1) + 1;
    state.lastStep = step;
    state.lines++;
    if (hasAny(parsed.metrics)) points.push({ step, metrics: parsed.metrics, format: format.name });
    return METRICS_READ;
  }
  return barMoved ? BAR_MOVED : UNCHANGED;
}

interface StdoutParserOptions {
  /** Compiled SHEPHERD_METRIC_PATTERN; tried before the built-in formats. */
  pattern?: RegExp;
  formats?: readonly StdoutFormat[];
}

export function createStdoutParser(options: StdoutParserOptions = {}) {
  const builtIn = options.formats ?? DEFAULT_FORMATS;
  // An explicit pattern is the operator's word for their own format, so it goes first.
  const formats =
    options.pattern === undefined ? builtIn : [customPatternFormat(options.pattern), ...builtIn];

  return {
    formats,
    /**
     * Read complete lines (each may hold `\r`-separated redraws and ANSI escape codes) into points,
     * updating `state`.
     */
    parseLines(lines: readonly string[], state: StdoutParseState): StdoutParseResult {
      const points: StdoutPoint[] = [];
      let barMoved = false;
      for (let index = 0; index < lines.length; index++) {
        const raw = lines[index] as string;
        // Colour and cursor codes (rich, colorama, loguru) glue to names and numbers: drop them first.
        // Only lines that hold an escape pay for it; output.log keeps its bytes.
        const line = raw.indexOf('\x1b') === -1 ? raw : stripVTControlCharacters(raw);
        // `\r`-separated redraws are read in place: no array of them per line.
        let from = 0;
        for (let end = line.indexOf('\r'); end !== -1; end = line.indexOf('\r', from)) {
          if (end - from >= 3)
            barMoved = barMovedAfter(readSegment(line.slice(from, end), formats, state, points), barMoved);
          from = end + 1;
        }
        const last = from === 0 ? line : line.slice(from);
        barMoved = barMovedAfter(readSegment(last, formats, state, points), barMoved);
      }
      const result: StdoutParseResult = { points };
      // Only the confirmed training bar counts as progress (a dataset Map bar's 7473/7473 is not a step).
      const fromBar = state.bar?.used === true ? barStep(state) : undefined;
      if (barMoved && fromBar !== undefined && fromBar > (state.lastStep ?? -1)) {
        state.lastStep = fromBar;
        result.progressStep = fromBar;
      }
      return result;
    },
  };
}

export type StdoutParser = ReturnType<typeof createStdoutParser>;
