import * as scan from './scan.js';
import type { PrintedMetrics, StdoutFormat } from './types.js';
import * as types from './types.js';

// Local bindings: under tsx every use of an imported name is a getter call, which doubled this hot loop.
const { isDigit, isLetter, isNameChar, scanNumber, skipSpaces, scanned } = scan;
const { MAX_METRICS_PER_LINE, STEP_KEYS } = types;

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

export const keyValueFormat: StdoutFormat = {
  name: 'key-value',
  parse(line: string): PrintedMetrics | undefined {
    // A line is kept only when it names a loss or a step (see above): skip the scan of all others.
    if (!CANDIDATE.test(line)) return undefined;
    const result: PrintedMetrics = { metrics: {} };
    let count = 0;
    let namesLoss = false;
    let explicitPairs = 0;
    const length = line.length;
    let index = 0;
    while (index < length) {
      const code = line.charCodeAt(index);
      if (!isLetter(code) || (index > 0 && isNameChar(line.charCodeAt(index - 1)))) {
        index++;
        continue;
      }
      const start = index;
      let upper = false;
      for (let next = code; index < length && isNameChar(next); next = line.charCodeAt(++index)) {
        if (next >= 65 && next <= 90) upper = true;
      }
      const nameEnd = index;
      if (nameEnd - start > MAX_NAME_CHARS) continue;
      let position = skipSpaces(line, nameEnd);
      const separator = line.charCodeAt(position);
      const explicit = separator === 61 /* = */ || separator === 58; /* : */
      if (explicit) position = skipSpaces(line, position + 1);
      else if (position === nameEnd) continue;
      const first = line.charCodeAt(position);
      if (!isDigit(first) && first !== 45 && first !== 43 && first !== 46 && !isLetter(first)) continue;
      const value = scanNumber(line, position);
      if (value === undefined) continue;
      let end = scanned.end;
      let unit = '';
      if (line.charCodeAt(end) === 109 /* m */ && line.charCodeAt(end + 1) === 115 /* s */) unit = 'ms';
      else if (line.charCodeAt(end) === 115 /* s */) unit = 's';
      else if (line.charCodeAt(end) === 37 /* % */) unit = '%';
      end += unit.length;
      const after = line.charCodeAt(end);
      if (end < length && (isLetter(after) || isDigit(after) || after === 95 || after === 46)) continue;
      index = end;
      const key = upper ? line.slice(start, nameEnd).toLowerCase() : line.slice(start, nameEnd);
      if (IGNORED_KEYS.has(key)) continue;
      if (STEP_KEYS.has(key)) {
        if (Number.isFinite(value) && result.step === undefined) result.step = value;
        continue;
      }
      const name = unit === 'ms' || unit === 's' ? `${key}_${unit}` : key;
      if (count >= MAX_METRICS_PER_LINE || result.metrics[name] !== undefined) continue;
      result.metrics[name] = value;
      count++;
      if (key.includes('loss')) namesLoss = true;
      else if (explicit) explicitPairs++;
    }
    if (count === 0) return undefined;
    if (namesLoss || (result.step !== undefined && explicitPairs > 0)) return result;
    return undefined;
  },
};
