/**
 * Bolt and the Slack SDKs want their own `Logger` shape; this forwards to the injected pino logger.
 * Bolt's `info` chatter (connection churn) is demoted to debug; the adapter logs what matters itself.
 */
import { type Logger as BoltLogger, LogLevel } from '@slack/bolt';
import type { Logger } from '../../logger.js';

function join(parts: unknown[]): string {
  return parts
    .map((part) =>
      typeof part === 'string' ? part : part instanceof Error ? part.message : JSON.stringify(part),
    )
    .join(' ');
}

export function createBoltLogger(logger: Logger): BoltLogger {
  const child = logger.child({ component: 'slack-sdk' });
  let level: LogLevel = child.isLevelEnabled('debug') ? LogLevel.DEBUG : LogLevel.WARN;
  return {
    debug: (...parts: unknown[]) => child.debug(join(parts)),
    info: (...parts: unknown[]) => child.debug(join(parts)),
    warn: (...parts: unknown[]) => child.warn(join(parts)),
    error: (...parts: unknown[]) => child.error(join(parts)),
    setLevel: (next: LogLevel) => {
      level = next;
    },
    getLevel: () => level,
    setName: () => {},
  };
}
