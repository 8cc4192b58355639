/**
 * The metric names the formats have read, looked up by the characters of the line they appear on. A progress
 * log repeats a handful of names on every line: slicing each out, hashing it for the step-key set and having
 * the engine look it up again as a property name cost more than the rest of the scan. Here a name is matched
 * in place and its strings (and whatever a format derives from it) are made once.
 */

const SLOTS = 512;

export interface NameEntry {
  /** The name as printed. */
  readonly text: string;
}

/** An own copy of `text` as the engine keeps property names: it does not hold on to the line it came from. */
function ownCopy(text: string): string {
  const holder: Record<string, true> = {};
  holder[text] = true;
  for (const key in holder) return key;
  return text;
}

function matches(text: string, line: string, start: number, end: number): boolean {
  if (text.length !== end - start) return false;
  for (let index = start; index < end; index++) {
    if (text.charCodeAt(index - start) !== line.charCodeAt(index)) return false;
  }
  return true;
}

/** One character folded into a name's hash. */
export function hashStep(hash: number, code: number): number {
  return (Math.imul(hash, 31) + code) | 0;
}

export class NameTable<Entry extends NameEntry> {
  // Direct-mapped: a name that collides replaces the one there, so the table stays this size.
  private readonly slots: Array<Entry | undefined> = new Array<Entry | undefined>(SLOTS).fill(undefined);
  private readonly make: (text: string) => Entry;

  constructor(make: (text: string) => Entry) {
    this.make = make;
  }

  /**
   * The entry for the name `line.slice(start, end)`; `hash` is `hashStep` folded over its characters from
   * 0 (the formats fold it while they scan the name).
   */
  get(line: string, start: number, end: number, hash: number): Entry {
    const slot = (hash ^ (hash >>> 9)) & (SLOTS - 1);
    const known = this.slots[slot];
    if (known !== undefined && matches(known.text, line, start, end)) return known;
    const entry = this.make(ownCopy(line.slice(start, end)));
    this.slots[slot] = entry;
    return entry;
  }
}
