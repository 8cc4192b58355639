/*
 * Playground user names are self-chosen, so names that would pass for Shepherd itself are refused,
 * including lookalikes: compared after NFKC, with format characters (zero-width, bidi controls, soft
 * hyphen), combining marks and whitespace removed, case-folded.
 */

const ALWAYS_RESERVED = ['shepherd', 'system'];

/**
 * Characters that change how a name looks without showing themselves: format characters (zero-width
 * space and joiners, bidi overrides and isolates such as U+202E, word joiner, soft hyphen, BOM), the
 * combining grapheme joiner and the Hangul fillers. A name holding one can pass for another person's
 * ("b\u202Eob" shows as an approver's name reversed), so such names are refused outright.
 */
const INVISIBLE = /\p{Cf}|\u034F|[\u115F\u1160\u3164\uFFA0]/u;

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

function isReservedName(name: string, botName: string): boolean {
  const candidate = comparableName(name);
  return [...ALWAYS_RESERVED, botName].some((reserved) => comparableName(reserved) === candidate);
}

/** Why a playground name is refused, or undefined when it may be used. */
export function nameRefusal(name: string, botName: string): string | undefined {
  if (INVISIBLE.test(name)) return 'this name holds invisible or direction-changing characters';
  if (isReservedName(name, botName)) return 'this name is reserved';
  return undefined;
}
