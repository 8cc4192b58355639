import * as nameTable from './name-table.js';
import * as scan from './scan.js';
import type { PrintedMetrics, StdoutFormat } from './types.js';
import * as types from './types.js';

/**
 * A Python dict as `print(dict)` writes it, which is how the Hugging Face Trainer prints its logs:
 * `{'loss': 0.4321, 'grad_norm': 1.23, 'learning_rate': 5e-05, 'epoch': 0.42}`, with bare `nan`, `inf`
 * and `-inf`; the `eval_*` dicts and the final `train_runtime` summary are the same shape. Values may also
 * be quoted (`'0.43'`), or wrapped as `tensor(0.43)` / `np.float64(0.43)`; other values are skipped.
 */

// Local bindings: under tsx every use of an imported name is a getter call (see bench/stdout-metrics.ts).
const { scanNumber, skipSpaces, scanned } = scan;
const { MAX_METRICS_PER_LINE, STEP_KEYS, printedMetrics } = types;
const { hashStep, NameTable } = nameTable;
const MAX_NAME_CHARS = 80;

interface DictKey extends nameTable.NameEntry {
  readonly step: boolean;
}

const keys = new NameTable<DictKey>((text) => ({ text, step: STEP_KEYS.has(text) }));

export const pythonDictFormat: StdoutFormat = {
  name: 'python-dict',
  parse(line: string): PrintedMetrics | undefined {
    if (line.charCodeAt(0) !== 123 /* { */ || line.charCodeAt(1) !== 39 /* ' */) return undefined;
    const length = line.length;
    if (line.charCodeAt(length - 1) !== 125 /* } */) return undefined;
    const metrics: Record<string, number> = {};
    let step: number | undefined;
    let count = 0;
    let index = 1;
    while (index < length) {
      const keyStart = index + 1;
      // The closing quote, hashing the key on the way.
      let keyEnd = keyStart;
      let hash = 0;
      for (; keyEnd < length; keyEnd++) {
        const code = line.charCodeAt(keyEnd);
        if (code === 39) break;
        hash = hashStep(hash, code);
      }
      if (keyEnd === length) break;
      let position = skipSpaces(line, keyEnd + 1);
      if (line.charCodeAt(position) === 58 /* : */ && keyEnd - keyStart <= MAX_NAME_CHARS) {
        position = skipSpaces(line, position + 1);
        const first = line.charCodeAt(position);
        if (first === 110 /* n */ && line.startsWith('np.float', position))
          position = line.indexOf('(', position) + 1;
        else if (first === 116 /* t */ && line.startsWith('tensor(', position)) position += 7;
        const quoted = line.charCodeAt(position) === 39;
        const value = scanNumber(line, quoted ? position + 1 : position);
        if (value !== undefined) {
          let end = scanned.end;
          if (quoted && line.charCodeAt(end) === 39) end++;
          if (line.charCodeAt(end) === 41 /* ) */) end++;
          const next = line.charCodeAt(skipSpaces(line, end));
          if (next === 44 /* , */ || next === 125 /* } */) {
            const key = keys.get(line, keyStart, keyEnd, hash);
            if (key.step) {
              if (Number.isFinite(value)) step = value;
            } else if (count < MAX_METRICS_PER_LINE) {
              metrics[key.text] = value;
              count++;
            }
          }
        }
      }
      // The next key starts after `, '` (a string value holding that text only costs us its key).
      const next = line.indexOf(", '", position);
      if (next === -1) break;
      index = next + 2;
    }
    return count === 0 && step === undefined ? undefined : printedMetrics(metrics, step);
  },
};
