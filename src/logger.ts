import { type DestinationStream, type Logger, pino } from 'pino';
import { redactDeep, redactSecrets } from './monitor/redact.js';

export type { Logger };

/**
 * The one place a logger is made; everything else receives it. Log lines leave the machine too (log
 * shippers, support bundles), so they go through the same redaction as chat posts and LLM requests:
 * logged objects value by value (errors included), then each finished line as a whole (which also covers
 * messages and child bindings).
 */
export function createLogger(
  level: string,
  bindings: Record<string, unknown> = {},
  destination: DestinationStream = pino.destination(1),
): Logger {
  const redacting: DestinationStream = { write: (line: string) => destination.write(redactSecrets(line)) };
  return pino(
    {
      level,
      base: { app: 'shepherd', ...bindings },
      formatters: { log: (object) => redactDeep(object) },
    },
    redacting,
  );
}
