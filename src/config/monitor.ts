import { z } from 'zod';
import { compileMetricPattern } from './metric-pattern.js';

/** Monitor variables whose checks need more than a number: a custom printed-metrics pattern, tracker links. */
export const monitorEnvironment = {
  /** Regex source with named groups; refused at start-up when it does not compile or lacks them. */
  SHEPHERD_METRIC_PATTERN: z
    .string()
    .optional()
    .transform((value) => (value === undefined || value.trim() === '' ? undefined : value.trim()))
    .superRefine((value, context) => {
      if (value === undefined) return;
      try {
        compileMetricPattern(value);
      } catch (error) {
        context.addIssue({ code: 'custom', message: error instanceof Error ? error.message : String(error) });
      }
    }),
  SHEPHERD_TRACKER_LINKS: z.enum(['on', 'off']).default('on'),
};
