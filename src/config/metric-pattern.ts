import { BotError } from '../errors.js';

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
