/*
 * Playground user names are self-chosen, so names that would pass for Shepherd itself are refused,
 * including lookalikes: compared after NFKC, with format characters (zero-width, bidi controls, soft
 * hyphen), combining marks and whitespace removed, case-folded.
 */

const ALWAYS_RESERVED = ['shepherd', 'system'];

/** The form two names are compared in. */
function comparableName(name: string): string {
  return name
    .normalize('NFKC')
    .replace(/\p{Cf}/gu, '')
    .normalize('NFD')
    .replace(/\p{M}/gu, '')
    .replace(/\s+/gu, '')
    .toLowerCase();
}

export function isReservedName(name: string, botName: string): boolean {
  const candidate = comparableName(name);
  return [...ALWAYS_RESERVED, botName].some((reserved) => comparableName(reserved) === candidate);
}
