import { BotError } from '../../errors.js';
import {
  MAX_METRICS_PER_LINE,
  type PrintedMetrics,
  parseNumber,
  STEP_KEYS,
  type StdoutFormat,
} from './types.js';

/** A `SHEPHERD_METRIC_PATTERN` that is not a usable regular expression. */
export class MetricPatternError extends BotError {
  constructor(message: string) {
    super('metric_pattern_invalid', message);
    this.name = 'MetricPatternError';
  }
}

/**
 * `SHEPHERD_METRIC_PATTERN`: a regular expression with named groups for lines no built-in format reads.
 * A group named `step` (or `global_step`, `iter`, `iteration`) is the step; every other named group is a
 * metric of that name. Groups that did not match or are not numbers are skipped.
 * Example: `^TRAIN it=(?<step>\d+) L=(?<loss>\S+) acc=(?<accuracy>\S+)`.
 */
export function compileMetricPattern(source: string): RegExp {
  let pattern: RegExp;
  try {
    pattern = new RegExp(source);
  } catch (error) {
    throw new MetricPatternError(
      `SHEPHERD_METRIC_PATTERN is not a valid regular expression: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  if (!/\(\?<[A-Za-z_]\w*>/.test(source)) {
    throw new MetricPatternError(
      'SHEPHERD_METRIC_PATTERN needs at least one named group, e.g. `step (?<step>\\d+) loss (?<loss>\\S+)`',
    );
  }
  return pattern;
}

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
