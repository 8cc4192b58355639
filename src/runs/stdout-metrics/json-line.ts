import { parseMetricLine } from '../../monitor/metric-line.js';
import type { PrintedMetrics, StdoutFormat } from './types.js';

/** A JSON object on a line (`{"step": 10, "loss": 0.52}`), read exactly as metrics.jsonl is (NaN allowed). */
export const jsonLineFormat: StdoutFormat = {
  name: 'json',
  parse(line: string): PrintedMetrics | undefined {
    if (line.charCodeAt(0) !== 123 /* { */ || line.charCodeAt(1) === 39 /* ' */) return undefined;
    const parsed = parseMetricLine(line);
    if (!parsed.ok) return undefined;
    const result: PrintedMetrics = { metrics: parsed.point.metrics };
    if (parsed.point.step !== undefined) result.step = parsed.point.step;
    return result;
  },
};
