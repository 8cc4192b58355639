import {
  MAX_METRICS_PER_LINE,
  type PrintedMetrics,
  parseNumber,
  STEP_KEYS,
  type StdoutFormat,
} from './types.js';

export function customPatternFormat(pattern: RegExp): StdoutFormat {
  return {
    name: 'pattern',
    parse(line: string): PrintedMetrics | undefined {
      const groups = pattern.exec(line)?.groups;
      if (groups === undefined) return undefined;
      const result: PrintedMetrics = { metrics: {} };
      let count = 0;
      for (const [name, text] of Object.entries(groups)) {
        if (text === undefined) continue;
        const value = parseNumber(text.trim().replace(/,$/, ''));
        if (value === undefined) continue;
        if (STEP_KEYS.has(name.toLowerCase())) {
          if (Number.isFinite(value)) result.step = value;
        } else if (count < MAX_METRICS_PER_LINE) {
          result.metrics[name] = value;
          count++;
        }
      }
      return count === 0 && result.step === undefined ? undefined : result;
    },
  };
}
