/**
 * Exact-match edits for `edit_script`. Each `old` must occur exactly once in the script as it stands
 * after the edits before it; otherwise the error shows where the candidates are (line numbers and
 * text), so the model can send a longer, unique `old`.
 */

interface ScriptEdit {
  old: string;
  new: string;
}

type EditResult = { ok: true; script: string } | { ok: false; error: string };

const MAX_CANDIDATES = 5;

function lineOf(text: string, index: number): number {
  let line = 1;
  for (
    let position = text.indexOf('\n');
    position !== -1 && position < index;
    position = text.indexOf('\n', position + 1)
  )
    line += 1;
  return line;
}

function occurrences(text: string, needle: string): number[] {
  const found: number[] = [];
  for (let index = text.indexOf(needle); index !== -1; index = text.indexOf(needle, index + 1))
    found.push(index);
  return found;
}

function showLine(lines: string[], number: number): string {
  const text = lines[number - 1] ?? '';
  return `  line ${number}: ${text.length > 160 ? `${text.slice(0, 160)}…` : text}`;
}

/** Lines that look like the start of `old`: its first non-blank line, trimmed, or most of its words. */
function nearMisses(script: string, old: string): number[] {
  const lines = script.split('\n');
  const firstLine =
    old
      .split('\n')
      .find((line) => line.trim() !== '')
      ?.trim() ?? '';
  if (firstLine === '') return [];
  // Spacing is the usual culprit: compare with runs of whitespace collapsed.
  const squash = (text: string) => text.replace(/\s+/g, ' ').trim();
  const wanted = squash(firstLine);
  const exact = lines.flatMap((line, index) => (squash(line).includes(wanted) ? [index + 1] : []));
  if (exact.length > 0) return exact.slice(0, MAX_CANDIDATES);
  const words = new Set(firstLine.split(/\W+/).filter((word) => word.length > 1));
  if (words.size === 0) return [];
  const scored = lines
    .map((line, index) => {
      const lineWords = new Set(line.split(/\W+/));
      let shared = 0;
      for (const word of words) if (lineWords.has(word)) shared += 1;
      return { number: index + 1, score: shared / words.size };
    })
    .filter((entry) => entry.score >= 0.5)
    .sort((a, b) => b.score - a.score);
  return scored.slice(0, MAX_CANDIDATES).map((entry) => entry.number);
}

export function applyEdits(script: string, edits: ScriptEdit[]): EditResult {
  let current = script;
  for (const [position, edit] of edits.entries()) {
    const label = edits.length === 1 ? 'the edit' : `edit ${position + 1}`;
    const found = occurrences(current, edit.old);
    const lines = current.split('\n');
    if (found.length === 0) {
      const near = nearMisses(current, edit.old);
      const hint =
        near.length === 0
          ? 'Nothing similar either: read the script with read_run_file and copy the text exactly (spaces and indentation count).'
          : `Closest lines (check spaces, indentation and quotes):\n${near.map((number) => showLine(lines, number)).join('\n')}`;
      return {
        ok: false,
        error: `${label}: \`old\` does not occur in train.py${position > 0 ? ' (after the edits before it)' : ''}. No change was proposed. ${hint}`,
      };
    }
    if (found.length > 1) {
      const shown = found.slice(0, MAX_CANDIDATES).map((index) => showLine(lines, lineOf(current, index)));
      return {
        ok: false,
        error: `${label}: \`old\` occurs ${found.length} times in train.py, at:\n${shown.join('\n')}${found.length > MAX_CANDIDATES ? '\n  …' : ''}\nNo change was proposed. Include more of the surrounding lines in \`old\` so it matches exactly once.`,
      };
    }
    const index = found[0] as number;
    current = current.slice(0, index) + edit.new + current.slice(index + edit.old.length);
  }
  return { ok: true, script: current };
}
