import type { z } from 'zod';

/*
 * Start-up checks for the settings that decide who can reach and steer the bot (see SECURITY.md).
 */

/** `localhost`, `*.localhost`, `127.0.0.0/8` and `::1` (with or without brackets or a trailing dot). */
export function isLoopbackName(host: string): boolean {
  const name = host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '');
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  if (name === '::1' || name === '0:0:0:0:0:0:0:1') return true;
  if (/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name)) return true;
  return /^::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name);
}

/** The platforms an approver entry may name: `slack:U02BOB`, `discord:1234`, `web:bob`. */
const APPROVER_PLATFORMS = ['slack', 'discord', 'web'] as const;

export function checkApproverList(list: string[], context: z.RefinementCtx): void {
  for (const entry of list) {
    const separator = entry.indexOf(':');
    if (separator < 0) continue;
    const platform = entry.slice(0, separator);
    const id = entry.slice(separator + 1);
    if (!(APPROVER_PLATFORMS as readonly string[]).includes(platform) || id.trim() === '') {
      context.addIssue({
        code: 'custom',
        message: `"${entry}": expected a user id, optionally prefixed with slack:, discord: or web:`,
      });
    }
  }
}

/** A playground reachable beyond this machine needs a token (or must be turned off). */
export function requirePlaygroundToken(
  environment: {
    SHEPHERD_HOST: string;
    SHEPHERD_PLAYGROUND: string;
    SHEPHERD_PLAYGROUND_TOKEN?: string | undefined;
  },
  context: z.RefinementCtx,
): void {
  if (environment.SHEPHERD_PLAYGROUND === 'off' || isLoopbackName(environment.SHEPHERD_HOST)) return;
  const token = environment.SHEPHERD_PLAYGROUND_TOKEN;
  if (token === undefined) {
    context.addIssue({
      code: 'custom',
      path: ['SHEPHERD_PLAYGROUND_TOKEN'],
      message: `SHEPHERD_HOST=${environment.SHEPHERD_HOST} exposes the web playground beyond this machine; set SHEPHERD_PLAYGROUND_TOKEN (a long random secret, e.g. \`openssl rand -hex 32\`) or SHEPHERD_PLAYGROUND=off`,
    });
  } else if (token.length < 16) {
    context.addIssue({
      code: 'custom',
      path: ['SHEPHERD_PLAYGROUND_TOKEN'],
      message: 'the playground token must be at least 16 characters',
    });
  }
}
