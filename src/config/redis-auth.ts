import path from 'node:path';
import { z } from 'zod';

/*
 * How every connection reaches Redis beyond its URL (issue 26): the CA for a `rediss://` server, and
 * the password the embedded Redis was given, kept in the data directory (see `ensure-redis.ts`).
 */

const optionalTrimmed = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === '' ? undefined : value.trim()));

interface SentinelAddress {
  host: string;
  port: number;
}

function parseSentinels(value: string | undefined, context: z.RefinementCtx): SentinelAddress[] | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const addresses: SentinelAddress[] = [];
  for (const entry of value.split(',').map((part) => part.trim())) {
    const match = /^(\[[0-9a-fA-F:]+\]|[^:\s]+):(\d{1,5})$/.exec(entry);
    const port = Number(match?.[2]);
    if (match?.[1] === undefined || !Number.isInteger(port) || port < 1 || port > 65_535) {
      context.addIssue({
        code: 'custom',
        message: `expected host:port,… (sentinel ${JSON.stringify(entry)})`,
      });
      return undefined;
    }
    addresses.push({ host: match[1].replace(/^\[|\]$/g, ''), port });
  }
  return addresses;
}

export const redisAuthEnvironment = {
  /** PEM file of the CA that signed the `rediss://` server's certificate (unset: the system's CAs). */
  REDIS_TLS_CA_FILE: z
    .string()
    .optional()
    .transform((value) => (value === undefined || value.trim() === '' ? undefined : value.trim())),
  /** Sentinels as `host:port,…`: when set, every connection asks them for the current primary. */
  REDIS_SENTINELS: z
    .string()
    .optional()
    .transform((value, context) => parseSentinels(value, context)),
  /** The master group name the sentinels monitor (`sentinel monitor <name> …`). */
  REDIS_SENTINEL_NAME: optionalTrimmed,
  /** The sentinels' own password (`requirepass` in sentinel.conf); the primary's stays in `REDIS_URL`. */
  REDIS_SENTINEL_PASSWORD: optionalTrimmed,
};

export function redisAuthSettings(environment: {
  REDIS_TLS_CA_FILE: string | undefined;
  REDIS_SENTINELS: SentinelAddress[] | undefined;
  REDIS_SENTINEL_NAME: string | undefined;
  REDIS_SENTINEL_PASSWORD: string | undefined;
  SHEPHERD_DATA_DIR: string;
}) {
  return {
    /** Sentinel (issue 26): the primary is whichever server the sentinels name; `REDIS_URL` keeps its credentials. */
    redisSentinel:
      environment.REDIS_SENTINELS === undefined || environment.REDIS_SENTINEL_NAME === undefined
        ? undefined
        : {
            sentinels: environment.REDIS_SENTINELS,
            name: environment.REDIS_SENTINEL_NAME,
            password: environment.REDIS_SENTINEL_PASSWORD,
          },
    redisAuth: {
      tlsCaFile: environment.REDIS_TLS_CA_FILE,
      /** The embedded Redis's password (mode 0600), used for a loopback `REDIS_URL` without one. */
      embeddedPasswordFile: path.resolve(environment.SHEPHERD_DATA_DIR, 'redis', 'password'),
    },
  };
}

/** A CA file only means something for a TLS URL: say so at start-up rather than ignore it. */
export function redisAuthProblem(environment: {
  REDIS_URL: string;
  REDIS_TLS_CA_FILE: string | undefined;
  REDIS_SENTINELS: SentinelAddress[] | undefined;
  REDIS_SENTINEL_NAME: string | undefined;
  REDIS_SENTINEL_PASSWORD: string | undefined;
}): string | undefined {
  const sentinels = environment.REDIS_SENTINELS !== undefined;
  if (sentinels !== (environment.REDIS_SENTINEL_NAME !== undefined)) {
    return sentinels
      ? '  REDIS_SENTINEL_NAME: set it to the master group name the sentinels monitor (REDIS_SENTINELS is set)'
      : '  REDIS_SENTINELS: set it to the sentinels as host:port,… (REDIS_SENTINEL_NAME is set)';
  }
  if (environment.REDIS_SENTINEL_PASSWORD !== undefined && !sentinels) {
    return '  REDIS_SENTINEL_PASSWORD: set only with REDIS_SENTINELS';
  }
  if (environment.REDIS_TLS_CA_FILE === undefined || environment.REDIS_URL.startsWith('rediss://')) {
    return undefined;
  }
  return `  REDIS_TLS_CA_FILE=${JSON.stringify(environment.REDIS_TLS_CA_FILE)}: set only with a rediss:// REDIS_URL (TLS)`;
}
