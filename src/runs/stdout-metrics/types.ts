/**
 * Metrics read from what a run prints (output.log), for scripts that don't use the `shepherd` helper.
 * Each format is a small parser object; `DEFAULT_FORMATS` lists them in the order they are tried, so a
 * new format is one new object in that list.
 */

/** What one printed line said: a step when the line named one, and its numeric metrics. */
export interface PrintedMetrics {
  step?: number;
  metrics: Record<string, number>;
}

export interface StdoutFormat {
  /** Short name, for logs and tests. */
  readonly name: string;
  /** The metrics on `line` (one `\r`/`\n`-separated segment, trimmed), or undefined when it isn't this format. */
  parse(line: string): PrintedMetrics | undefined;
}

/**
 * A format's answer, made once its step is known: an object given `step` after it was made grew a property
 * store for it (one more allocation per printed line).
 */
export function printedMetrics(metrics: Record<string, number>, step: number | undefined): PrintedMetrics {
  return step === undefined ? { metrics } : { metrics, step };
}

/** Keys that carry the training step rather than a metric, as scripts usually spell them. */
export const STEP_KEYS = new Set(['step', 'global_step', 'iter', 'iteration', 'steps']);

/** More metrics than this on one line is a dump, not a progress line; the rest are dropped. */
export const MAX_METRICS_PER_LINE = 64;

/** Parse a number as Python and most loggers print it, `nan`/`inf`/`-inf` included (any case). */
export function parseNumber(text: string): number | undefined {
  const lower = text.toLowerCase();
  const sign = lower.startsWith('-') ? -1 : 1;
  const unsigned = lower.startsWith('-') || lower.startsWith('+') ? lower.slice(1) : lower;
  if (unsigned === 'nan') return Number.NaN;
  if (unsigned === 'inf' || unsigned === 'infinity') return sign * Number.POSITIVE_INFINITY;
  const value = Number(lower);
  return Number.isNaN(value) || lower === '' ? undefined : value;
}
