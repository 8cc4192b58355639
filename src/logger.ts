import { type Logger, pino } from 'pino';
import { redactDeep, redactSecrets } from './monitor/redact.js';

export type { Logger };

/**
 * The one place a logger is made; everything else receives it. Log lines leave the machine too (log
 * shippers, support bundles), so every message and every logged value goes through the same redaction
 * as chat posts and LLM requests.
 */
export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { app: 'shepherd', ...bindings },
    formatters: {
      log: (object) => redactDeep(object),
      bindings: (object) => redactDeep(object),
    },
    hooks: {
      logMethod(args, method) {
        const redacted = args.map((argument) =>
          typeof argument === 'string' ? redactSecrets(argument) : argument,
        ) as Parameters<typeof method>;
        method.apply(this, redacted);
      },
    },
  });
}
