/**
 * Hand-written scanners shared by the formats: a regular expression per pair costs microseconds per line,
 * and the monitor may read a million lines of backlog in one go (bench/stdout-metrics.ts).
 */

/** Character classes, as bits of `classOf`: one table load instead of a chain of range tests. */
export const LETTER = 1;
export const DIGIT = 2;
/** Characters of a metric name: letters, digits, `_`, `.`, `/`, `-`. */
export const NAME = 4;

const CLASSES = new Uint8Array(128);
for (let code = 0; code < 128; code++) {
  const letter = (code >= 65 && code <= 90) || (code >= 97 && code <= 122);
  const digit = code >= 48 && code <= 57;
  const name = letter || digit || code === 95 || code === 46 || code === 47 || code === 45;
  CLASSES[code] = (letter ? LETTER : 0) | (digit ? DIGIT : 0) | (name ? NAME : 0);
}

/** The class bits of a character code (0 for anything outside ASCII, and for NaN past the end). */
export function classOf(code: number): number {
  return code < 128 ? (CLASSES[code] as number) : 0;
}

export function skipSpaces(text: string, index: number): number {
  let position = index;
  while (position < text.length && text.charCodeAt(position) === 32) position++;
  return position;
}

/** Where the last successful `scanNumber` ended (one shared object: no allocation per number). */
export const scanned = { end: 0 };

/**
 * The number starting at `index` (`-1.5e-3`, `.5`, `nan`, `inf`, `-inf`, `infinity`, any case), or
 * undefined; `scanned.end` is then the index after it.
 */
export function scanNumber(text: string, index: number): number | undefined {
  const length = text.length;
  let position = index;
  // -1 past the end: charCodeAt's NaN there costs a deoptimisation per call site.
  let code = position < length ? text.charCodeAt(position) : -1;
  let negative = false;
  if (code === 45 || code === 43) {
    negative = code === 45;
    position++;
    code = position < length ? text.charCodeAt(position) : -1;
  }
  if (code === 110 || code === 78 || code === 105 || code === 73) {
    const word = text.slice(position, position + 8).toLowerCase();
    if (word.startsWith('nan')) {
      scanned.end = position + 3;
      return Number.NaN;
    }
    if (!word.startsWith('inf')) return undefined;
    scanned.end = position + (word === 'infinity' ? 8 : 3);
    return negative ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY;
  }
  // The digits are gathered as they are scanned: when they fit in 15 digits and the power of ten is one
  // of the exactly representable ones (up to 1e22), one multiplication or division is correctly rounded,
  // so it gives what Number() gives (Clinger's fast path) without slicing the text.
  const start = position;
  let digits = 0;
  let mantissa = 0;
  while (code >= 48 && code <= 57) {
    mantissa = mantissa * 10 + (code - 48);
    code = ++position < length ? text.charCodeAt(position) : -1;
  }
  const integerDigits = position - start;
  digits = integerDigits;
  let scale = 0;
  if (code === 46 /* . */) {
    const fractionStart = ++position;
    code = position < length ? text.charCodeAt(position) : -1;
    while (code >= 48 && code <= 57) {
      mantissa = mantissa * 10 + (code - 48);
      code = ++position < length ? text.charCodeAt(position) : -1;
    }
    scale = position - fractionStart;
    digits += scale;
    if (integerDigits === 0 && scale === 0) return undefined;
  } else if (integerDigits === 0) {
    return undefined;
  }
  let exponent = 0;
  let exponentDigits = 0;
  if (code === 101 || code === 69) {
    let exponentAt = position + 1;
    const sign = exponentAt < length ? text.charCodeAt(exponentAt) : -1;
    if (sign === 45 || sign === 43) exponentAt++;
    code = exponentAt < length ? text.charCodeAt(exponentAt) : -1;
    if (code >= 48 && code <= 57) {
      position = exponentAt;
      while (code >= 48 && code <= 57) {
        exponent = exponent * 10 + (code - 48);
        exponentDigits++;
        code = ++position < length ? text.charCodeAt(position) : -1;
      }
      if (sign === 45) exponent = -exponent;
    }
  }
  const power = exponent - scale;
  if (digits <= 15 && exponentDigits <= 3 && power >= -22 && power <= 22) {
    const magnitude =
      power >= 0 ? mantissa * (POWERS_OF_TEN[power] as number) : mantissa / (POWERS_OF_TEN[-power] as number);
    scanned.end = position;
    return negative ? -magnitude : magnitude;
  }
  const value = Number(text.slice(index, position));
  if (Number.isNaN(value)) return undefined;
  scanned.end = position;
  return value;
}

/** 1e0 … 1e22: every one exactly representable as a double. */
const POWERS_OF_TEN = Array.from({ length: 23 }, (_, power) => 10 ** power);
