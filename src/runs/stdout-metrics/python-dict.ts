import {
  MAX_METRICS_PER_LINE,
  type PrintedMetrics,
  parseNumber,
  STEP_KEYS,
  type StdoutFormat,
} from './types.js';

/**
 * A Python dict as `print(dict)` writes it, which is how the Hugging Face Trainer prints its logs:
 * `{'loss': 0.4321, 'grad_norm': 1.23, 'learning_rate': 5e-05, 'epoch': 0.42}`, with bare `nan`, `inf`
 * and `-inf`; the `eval_*` dicts and the final `train_runtime` summary are the same shape. Values may also
 * be quoted (`'0.43'`), or wrapped as `tensor(0.43)` / `np.float64(0.43)`; other values are skipped.
 */

const PAIR =
  /'([^'\\]{1,80})'\s*:\s*(?:np\.float\d*\(|tensor\()?'?([-+]?(?:nan|inf(?:inity)?|\d+\.?\d*(?:e[-+]?\d+)?|\.\d+(?:e[-+]?\d+)?))'?(?=\s*[,)}])/gi;

export const pythonDictFormat: StdoutFormat = {
  name: 'python-dict',
  parse(line: string): PrintedMetrics | undefined {
    if (line.charCodeAt(0) !== 123 /* { */ || line.charCodeAt(1) !== 39 /* ' */) return undefined;
    if (line.charCodeAt(line.length - 1) !== 125 /* } */) return undefined;
    const result: PrintedMetrics = { metrics: {} };
    let count = 0;
    PAIR.lastIndex = 0;
    for (let match = PAIR.exec(line); match !== null; match = PAIR.exec(line)) {
      const key = match[1] as string;
      const value = parseNumber(match[2] as string);
      if (value === undefined) continue;
      if (STEP_KEYS.has(key.toLowerCase())) {
        if (Number.isFinite(value)) result.step = value;
        continue;
      }
      if (count >= MAX_METRICS_PER_LINE) continue;
      result.metrics[key] = value;
      count++;
    }
    return count === 0 && result.step === undefined ? undefined : result;
  },
};
