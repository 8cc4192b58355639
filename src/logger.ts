import { hostname } from 'node:os';
import { type DestinationStream, type Logger, pino } from 'pino';
import { redactDeep, redactSecrets } from './text/redact.js';

export type { Logger };

type LogFormat = 'auto' | 'json' | 'pretty';

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
 * `format` picks JSON or pino-pretty (`auto`: pretty only when stdout is a terminal). Log lines leave the
 * machine too (log shippers, support bundles), so they go through the same redaction as chat posts and
 * LLM requests: logged objects value by value (errors included), then each finished line as a whole
 * (which also covers messages and child bindings).
 */
export function createLogger(
  level: string,
  bindings: Record<string, unknown> = {},
  options: { format?: LogFormat; isTerminal?: boolean; destination?: DestinationStream } = {},
): Logger {
  const stream =
    options.destination ??
    prettyStream(options.format ?? 'json', options.isTerminal ?? false) ??
    pino.destination(1);
  const redacting: DestinationStream = { write: (line: string) => stream.write(redactSecrets(line)) };
  const settings = {
    level,
    base: { app: 'shepherd', pid: process.pid, hostname: hostname(), ...bindings },
    // Errors reach the formatter as they are: redactDeep writes their type (name), message, stack, code and
    // cause, redacted (pino's own serializer would name every type "Object" once copied).
    serializers: { err: (value: unknown) => value },
    formatters: { log: (object: Record<string, unknown>) => redactDeep(object) },
  };
  return pino(settings, redacting);
}
