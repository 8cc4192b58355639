import type { ToolCall } from '../tools/tool-call.js';

/**
 * Detects a model stuck in a loop: the same tool call (name, arguments and result) three times in a
 * row, or a cycle of 2–5 calls repeated (three times for a 2-cycle, twice for longer ones, so the
 * evidence is at least six calls).
 */

export const REPETITION_NOTE =
  'You are repeating the same tool calls and getting the same results. Stop repeating them: change approach, ' +
  'use what you already know to answer, or ask the people in the thread for what you are missing.';

/** Same arguments in a different key order are the same call. */
function canonicalArguments(raw: string): string {
  try {
    return JSON.stringify(sortKeys(JSON.parse(raw)));
  } catch {
    return raw.trim();
  }
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>)
        .sort(([left], [right]) => left.localeCompare(right))
        .map(([key, inner]) => [key, sortKeys(inner)]),
    );
  }
  return value;
}

export function callSignature(call: Pick<ToolCall, 'name' | 'arguments'>, result: string): string {
  return JSON.stringify([call.name, canonicalArguments(call.arguments), result]);
}

/** Pure check over a sequence of call signatures, newest last. */
export function detectRepetition(signatures: readonly string[]): 'identical' | 'cycle' | undefined {
  const count = signatures.length;
  if (
    count >= 3 &&
    signatures[count - 1] === signatures[count - 2] &&
    signatures[count - 2] === signatures[count - 3]
  ) {
    return 'identical';
  }
  for (let period = 2; period <= 5; period += 1) {
    const repeats = period === 2 ? 3 : 2;
    const span = period * repeats;
    if (count < span) continue;
    const tail = signatures.slice(count - span);
    const cycle = tail.slice(0, period);
    // A "cycle" of one repeated call is the identical case, handled above.
    if (new Set(cycle).size === 1) continue;
    if (tail.every((signature, index) => signature === cycle[index % period])) return 'cycle';
  }
  return undefined;
}

/** Stateful wrapper used by the loop: record each executed call, ask whether to intervene. */
export function createRepetitionGuard() {
  let signatures: string[] = [];
  return {
    record(call: Pick<ToolCall, 'name' | 'arguments'>, result: string): void {
      signatures.push(callSignature(call, result));
    },
    /** Returns the pattern once and forgets the calls, so the next note needs fresh repetition. */
    check(): 'identical' | 'cycle' | undefined {
      const found = detectRepetition(signatures);
      if (found !== undefined) signatures = [];
      return found;
    },
  };
}
