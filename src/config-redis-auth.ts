import path from 'node:path';
import { z } from 'zod';

/*
 * How every connection reaches Redis beyond its URL (issue 26): the CA for a `rediss://` server, and
 * the password the embedded Redis was given, kept in the data directory (see `ensure-redis.ts`).
 */

export const redisAuthEnvironment = {
  /** PEM file of the CA that signed the `rediss://` server's certificate (unset: the system's CAs). */
  REDIS_TLS_CA_FILE: z
    .string()
    .optional()
    .transform((value) => (value === undefined || value.trim() === '' ? undefined : value.trim())),
};

export function redisAuthSettings(environment: {
  REDIS_TLS_CA_FILE: string | undefined;
  SHEPHERD_DATA_DIR: string;
}) {
  return {
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
}): string | undefined {
  if (environment.REDIS_TLS_CA_FILE === undefined || environment.REDIS_URL.startsWith('rediss://')) {
    return undefined;
  }
  return `  REDIS_TLS_CA_FILE=${JSON.stringify(environment.REDIS_TLS_CA_FILE)}: set only with a rediss:// REDIS_URL (TLS)`;
}
