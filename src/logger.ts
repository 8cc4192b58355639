import { hostname } from 'node:os';
import { type DestinationStream, type Logger, pino } from 'pino';

export type { Logger };

export type LogFormat = 'auto' | 'json' | 'pretty';

/** Readable lines for a person at a terminal; JSON for everything that collects logs. */
function prettyStream(format: LogFormat, isTerminal: boolean): DestinationStream | undefined {
  if (format === 'json' || (format === 'auto' && !isTerminal)) return undefined;
  return pino.transport({
    target: 'pino-pretty',
    options: { colorize: isTerminal, translateTime: 'SYS:HH:MM:ss.l', ignore: 'app' },
  }) as DestinationStream;
}

/**
 * The one place a logger is made; everything else receives it. pid and hostname stay on every line;
 * `format` picks JSON or pino-pretty (`auto`: pretty only when stdout is a terminal).
 */
export function createLogger(
  level: string,
  bindings: Record<string, unknown> = {},
  options: { format?: LogFormat; isTerminal?: boolean } = {},
): Logger {
  const stream = prettyStream(options.format ?? 'json', options.isTerminal ?? false);
  const settings = { level, base: { app: 'shepherd', pid: process.pid, hostname: hostname(), ...bindings } };
  return stream === undefined ? pino(settings) : pino(settings, stream);
}
