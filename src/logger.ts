import { type Logger, pino } from 'pino';

export type { Logger };

/** The one place a logger is made; everything else receives it. */
export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({ level, base: { app: 'shepherd', ...bindings } });
}
