/**
 * Hand-written scanners shared by the formats: a regular expression per pair costs microseconds per line,
 * and the monitor may read a million lines of backlog in one go (bench/stdout-metrics.ts).
 */

export function isLetter(code: number): boolean {
  return (code >= 65 && code <= 90) || (code >= 97 && code <= 122);
}

export function isDigit(code: number): boolean {
  return code >= 48 && code <= 57;
}

/** Characters of a metric name: letters, digits, `_`, `.`, `/`, `-`. */
export function isNameChar(code: number): boolean {
  return isLetter(code) || isDigit(code) || code === 95 || code === 46 || code === 47 || code === 45;
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
  let position = index;
  let code = text.charCodeAt(position);
  let negative = false;
  if (code === 45 || code === 43) {
    negative = code === 45;
    position++;
    code = text.charCodeAt(position);
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
  const start = position;
  while (code >= 48 && code <= 57) code = text.charCodeAt(++position);
  const integerDigits = position - start;
  if (code === 46 /* . */) {
    const fractionStart = ++position;
    code = text.charCodeAt(position);
    while (code >= 48 && code <= 57) code = text.charCodeAt(++position);
    if (integerDigits === 0 && position === fractionStart) return undefined;
  } else if (integerDigits === 0) {
    return undefined;
  }
  if (code === 101 || code === 69) {
    let exponent = position + 1;
    const sign = text.charCodeAt(exponent);
    if (sign === 45 || sign === 43) exponent++;
    code = text.charCodeAt(exponent);
    if (code >= 48 && code <= 57) {
      position = exponent;
      while (code >= 48 && code <= 57) code = text.charCodeAt(++position);
    }
  }
  const value = Number(text.slice(index, position));
  if (Number.isNaN(value)) return undefined;
  scanned.end = position;
  return value;
}
