import { DISCORD_LIMITS, type DiscordFile } from './cards.js';

/*
 * Pure text shaping for Discord's 2,000-character messages: split at line boundaries with code fences kept
 * balanced, and turn long logs/diffs into file attachments with a short excerpt and a cut note.
 */

const CLOSING_FENCE = '\n```';
const FENCE_LINE = /^\s*```/;

/**
 * Split `text` into messages of at most `limit` characters, breaking at line ends where possible. A chunk
 * that ends inside a code block closes it and the next chunk reopens it with the same language.
 */
export function splitContent(text: string, limit: number = DISCORD_LIMITS.content): string[] {
  const chunks: string[] = [];
  let lines: string[] = [];
  let size = 0;
  let contentLines = 0;
  /** The opening fence line (```` ```ts ````) while inside a code block. */
  let fence: string | undefined;

  const lengthWith = (line: string) => (lines.length === 0 ? line.length : size + 1 + line.length);
  const push = (line: string) => {
    size = lengthWith(line);
    lines.push(line);
    contentLines += 1;
  };
  const flush = () => {
    const body = lines.join('\n');
    if (contentLines > 0 && body.trim() !== '')
      chunks.push(fence === undefined ? body : body + CLOSING_FENCE);
    lines = [];
    size = 0;
    contentLines = 0;
    if (fence !== undefined) {
      lines = [fence];
      size = fence.length;
    }
  };

  for (const line of text.split('\n')) {
    const toggles = FENCE_LINE.test(line);
    const fenceAfter = toggles ? (fence === undefined ? line.trim() : undefined) : fence;
    const reserve = fenceAfter === undefined ? 0 : CLOSING_FENCE.length;
    if (lengthWith(line) + reserve > limit) flush();
    let rest = line;
    // A single line longer than a message is cut hard; nothing better exists for it.
    while (lengthWith(rest) + reserve > limit) {
      const room = Math.max(1, limit - reserve - (lines.length === 0 ? 0 : size + 1));
      push(rest.slice(0, room));
      rest = rest.slice(room);
      flush();
    }
    push(rest);
    fence = fenceAfter;
  }
  flush();
  return chunks.length === 0 ? ['\u200b'] : chunks;
}

interface ExtractOptions {
  /** Code blocks longer than this many characters become attachments. */
  maxInlineBlock?: number;
  /** Lines of the block kept inline as an excerpt. */
  excerptLines?: number;
}

interface ExtractedText {
  text: string;
  files: DiscordFile[];
}

const FENCED_BLOCK = /^```([^\n`]*)\n([\s\S]*?)\n?^```[ \t]*$/gm;
const EXTENSIONS: Record<string, string> = {
  diff: 'diff',
  patch: 'diff',
  python: 'py',
  py: 'py',
  json: 'json',
};

/**
 * Replace code blocks too long to read inline with an excerpt (the head of a diff, the tail of a log, where
 * the traceback is) and a cut note, and return the full blocks as text files.
 */
export function extractLongBlocks(text: string, options: ExtractOptions = {}): ExtractedText {
  const maxInlineBlock = options.maxInlineBlock ?? 1500;
  const excerptLines = options.excerptLines ?? 12;
  const files: DiscordFile[] = [];
  const replaced = text.replace(FENCED_BLOCK, (whole, info: string, body: string) => {
    if (body.length <= maxInlineBlock) return whole;
    const language = info.trim();
    const isDiff = language === 'diff' || language === 'patch' || /^(---|\+\+\+|@@) /m.test(body);
    const extension = EXTENSIONS[language] ?? (isDiff ? 'diff' : 'txt');
    const filename = `${isDiff ? 'diff' : 'log'}-${files.length + 1}.${extension}`;
    files.push({
      name: filename,
      data: new TextEncoder().encode(body),
      contentType: 'text/plain; charset=utf-8',
    });
    const lines = body.split('\n');
    const excerpt = (isDiff ? lines.slice(0, excerptLines) : lines.slice(-excerptLines))
      .map((line) => (line.length > 160 ? `${line.slice(0, 159)}…` : line))
      .join('\n');
    const where = isDiff ? 'first' : 'last';
    return `\`\`\`${language}\n${excerpt}\n\`\`\`\n-# cut: ${where} ${Math.min(excerptLines, lines.length)} of ${lines.length} lines shown — full text in \`${filename}\``;
  });
  return { text: replaced, files };
}
