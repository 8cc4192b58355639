import * as nameTable from './name-table.js';
import * as scan from './scan.js';
import type { PrintedMetrics, StdoutFormat } from './types.js';
import * as types from './types.js';

// Local bindings: under tsx every use of an imported name is a getter call, which doubled this hot loop.
const { classOf, LETTER, DIGIT, NAME, scanNumber, skipSpaces, scanned } = scan;
const { MAX_METRICS_PER_LINE, STEP_KEYS, printedMetrics } = types;
const { hashStep, NameTable } = nameTable;

/**
 * Progress lines of the `name value` kind, however they are punctuated:
 * `step 10 | loss 0.52 | lr 3e-4`, `step=10 loss=0.52`, `[step 10] loss: 0.52`, nanoGPT's
 * `iter 200: loss 2.1, time 35ms`, `Epoch 1 Step 200: loss=0.48`, Lightning's progress-bar postfix
 * `…, loss=0.52, v_num=0]` and Keras' `- loss: 0.52 - accuracy: 0.81`.
 *
 * A pair is a name (starting with a letter, not glued to a preceding word or number), `=`, `:` or spaces,
 * then a number with an optional `ms`/`s`/`%` unit. Free text holds numbers too ("loaded 3 files"), so a
 * line counts only when it names a loss, or names a step and at least one other metric written
 * `name=value` or `name: value`. Names are case-folded (`Epoch 1` → `epoch`).
 */

/** Keys that look like metrics but are bookkeeping. */
const IGNORED_KEYS = new Set(['v_num']);
const MAX_NAME_CHARS = 64;
const CANDIDATE = /loss|step|iter/i;

interface KeyName extends nameTable.NameEntry {
  /** Case-folded. */
  readonly key: string;
  readonly ignored: boolean;
  readonly step: boolean;
  readonly loss: boolean;
  /** The metric names with a `ms` / `s` unit: `time_ms`. */
  readonly milliseconds: string;
  readonly seconds: string;
}

const names = new NameTable<KeyName>((text) => {
  const key = text.toLowerCase();
  return {
    text,
    key,
    ignored: IGNORED_KEYS.has(key),
    step: STEP_KEYS.has(key),
    loss: key.includes('loss'),
    milliseconds: `${key}_ms`,
    seconds: `${key}_s`,
  };
});

// The unit after a number: none, `ms`, `s` or `%`.
const NO_UNIT = 0;
const MILLISECONDS = 1;
const SECONDS = 2;
const PERCENT = 3;

export const keyValueFormat: StdoutFormat = {
  name: 'key-value',
  parse(line: string): PrintedMetrics | undefined {
    // A line is kept only when it names a loss or a step (see above): skip the scan of all others.
    if (!CANDIDATE.test(line)) return undefined;
    const metrics: Record<string, number> = {};
    let step: number | undefined;
    let count = 0;
    let namesLoss = false;
    let explicitPairs = 0;
    const length = line.length;
    let index = 0;
    // Every read is bounds-checked: one past the end is a deoptimisation (and a recompile) per call site.
    while (index < length) {
      const kind = classOf(line.charCodeAt(index));
      if ((kind & LETTER) === 0) {
        // Not a name start, nor is any letter glued to this run of name characters.
        index++;
        if ((kind & NAME) !== 0)
          while (index < length && (classOf(line.charCodeAt(index)) & NAME) !== 0) index++;
        continue;
      }
      // Here the previous character (if any) is not a name character: the loop stops only after those.
      const start = index;
      let hash = hashStep(0, line.charCodeAt(index));
      while (++index < length) {
        const code = line.charCodeAt(index);
        if ((classOf(code) & NAME) === 0) break;
        hash = hashStep(hash, code);
      }
      const nameEnd = index;
      if (nameEnd - start > MAX_NAME_CHARS) continue;
      let position = skipSpaces(line, nameEnd);
      const separator = position < length ? line.charCodeAt(position) : 0;
      const explicit = separator === 61 /* = */ || separator === 58; /* : */
      if (explicit) position = skipSpaces(line, position + 1);
      else if (position === nameEnd) continue;
      if (position >= length) continue;
      const first = line.charCodeAt(position);
      if ((classOf(first) & (LETTER | DIGIT)) === 0 && first !== 45 && first !== 43 && first !== 46) continue;
      const value = scanNumber(line, position);
      if (value === undefined) continue;
      let end = scanned.end;
      const unitChar = end < length ? line.charCodeAt(end) : 0;
      let unit = NO_UNIT;
      if (unitChar === 109 /* m */ && end + 1 < length && line.charCodeAt(end + 1) === 115 /* s */) {
        unit = MILLISECONDS;
        end += 2;
      } else if (unitChar === 115 /* s */) {
        unit = SECONDS;
        end++;
      } else if (unitChar === 37 /* % */) {
        unit = PERCENT;
        end++;
      }
      if (end < length) {
        const after = line.charCodeAt(end);
        if ((classOf(after) & (LETTER | DIGIT)) !== 0 || after === 95 || after === 46) continue;
      }
      index = end;
      const entry = names.get(line, start, nameEnd, hash);
      if (entry.ignored) continue;
      if (entry.step) {
        if (Number.isFinite(value) && step === undefined) step = value;
        continue;
      }
      const name = unit === MILLISECONDS ? entry.milliseconds : unit === SECONDS ? entry.seconds : entry.key;
      if (count >= MAX_METRICS_PER_LINE || metrics[name] !== undefined) continue;
      metrics[name] = value;
      count++;
      if (entry.loss) namesLoss = true;
      else if (explicit) explicitPairs++;
    }
    if (count === 0) return undefined;
    if (namesLoss || (step !== undefined && explicitPairs > 0)) return printedMetrics(metrics, step);
    return undefined;
  },
};
