import {
  MAX_METRICS_PER_LINE,
  type PrintedMetrics,
  parseNumber,
  STEP_KEYS,
  type StdoutFormat,
} from './types.js';

/**
 * Progress lines of the `name value` kind, however they are punctuated:
 * `step 10 | loss 0.52 | lr 3e-4`, `step=10 loss=0.52`, `[step 10] loss: 0.52`, nanoGPT's
 * `iter 200: loss 2.1, time 35ms`, `Epoch 1 Step 200: loss=0.48`, Lightning's progress-bar postfix
 * `…, loss=0.52, v_num=0]` and Keras' `- loss: 0.52 - accuracy: 0.81`.
 *
 * Free text holds numbers too ("loaded 3 files"), so a line counts only when it names a loss, or names a
 * step and at least one other metric written `name=value` or `name: value`.
 */

// key (not glued to a preceding word or number), separator (`=`, `:` or spaces), number, optional unit.
const PAIR =
  /(?<![\w./-])([A-Za-z][\w./-]{0,63})(\s*[=:]\s*|\s+)([-+]?(?:nan|inf|\d+\.?\d*(?:e[-+]?\d+)?|\.\d+(?:e[-+]?\d+)?))(ms|s|%)?(?![\w.])/gi;

/** Keys that look like metrics but are bookkeeping. */
const IGNORED_KEYS = new Set(['v_num']);

export const keyValueFormat: StdoutFormat = {
  name: 'key-value',
  parse(line: string): PrintedMetrics | undefined {
    const result: PrintedMetrics = { metrics: {} };
    let count = 0;
    let namesLoss = false;
    let explicitPairs = 0;
    PAIR.lastIndex = 0;
    for (let match = PAIR.exec(line); match !== null; match = PAIR.exec(line)) {
      // `Epoch 1`, `Loss: 0.5`: names are case-folded so every format charts as `epoch`, `loss`.
      const key = (match[1] as string).toLowerCase();
      const lower = key;
      if (IGNORED_KEYS.has(lower)) continue;
      const value = parseNumber(match[3] as string);
      if (value === undefined) continue;
      if (STEP_KEYS.has(lower)) {
        if (Number.isFinite(value) && result.step === undefined) result.step = value;
        continue;
      }
      if (count >= MAX_METRICS_PER_LINE) continue;
      const unit = match[4];
      const name = unit === 'ms' || unit === 's' ? `${key}_${unit}` : key;
      if (result.metrics[name] !== undefined) continue;
      result.metrics[name] = value;
      count++;
      if (lower.includes('loss')) namesLoss = true;
      else if ((match[2] as string).trim() !== '') explicitPairs++;
    }
    if (count === 0) return undefined;
    if (namesLoss || (result.step !== undefined && explicitPairs > 0)) return result;
    return undefined;
  },
};
