/**
 * Markdown → Slack mrkdwn, and splitting long mrkdwn into pieces that fit Slack's block limits.
 * Pure: no SDK, no I/O.
 */

/** Slack's limit for the text of one `section` block. */
export const SECTION_TEXT_LIMIT = 3000;

const MARKDOWN_LINK = /!?\[([^\]\n]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g;
const PLACEHOLDER = /\uE000(\d+)\uE000/g;

/** Escape the three characters Slack treats as control characters in mrkdwn. */
export function escapeMrkdwn(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

/** Undo `escapeMrkdwn` for text coming from Slack (the agent should see `<`, not `&lt;`). */
export function unescapeMrkdwn(text: string): string {
  return text.replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&amp;', '&');
}

function convertEmphasis(text: string): string {
  // Bold first into a private marker so the single-star italic rule does not see it.
  return text
    .replace(/\*\*(?=\S)(.+?)(?<=\S)\*\*/g, '\uE001$1\uE001')
    .replace(/__(?=\S)(.+?)(?<=\S)__/g, '\uE001$1\uE001')
    .replace(/(^|[^\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?!\w)/g, '$1_$2_')
    .replace(/~~(?=\S)(.+?)(?<=\S)~~/g, '~$1~')
    .replaceAll('\uE001', '*');
}

function convertInline(text: string): string {
  const kept: string[] = [];
  const keep = (value: string): string => {
    kept.push(value);
    return `\uE000${kept.length - 1}\uE000`;
  };
  // Placeholder characters in the input could smuggle a kept token; they have no business in chat text.
  const working = text
    .replaceAll('\uE000', '')
    .replace(MARKDOWN_LINK, (_match, label: string, url: string) => {
      // Only web links become links, and a label that looks like another address shows the real one.
      if (!/^(?:https?|mailto):/i.test(url) || /[<>|\s]/.test(url)) return keep(escapeMrkdwn(_match));
      const cleanLabel = escapeMrkdwn(label).replaceAll('|', '¦');
      if (cleanLabel.length === 0 || looksLikeAddress(label)) return keep(`<${url}>`);
      return keep(`<${url}|${cleanLabel}>`);
    });
  return convertEmphasis(escapeMrkdwn(working)).replace(
    PLACEHOLDER,
    (_match, index: string) => kept[Number(index)] ?? '',
  );
}

/**
 * Markdown links for Slack's `markdown` block: a label that looks like another address shows the real
 * target instead (`[https://good](https://evil)` → `[https://evil](https://evil)`), as in mrkdwn.
 */
export function undisguiseMarkdownLinks(markdown: string): string {
  return markdown.replace(MARKDOWN_LINK, (match, label: string, url: string) =>
    looksLikeAddress(label) ? `[${url}](${url})` : match,
  );
}

/** A label that reads like a URL or domain could disguise where a link goes. */
function looksLikeAddress(label: string): boolean {
  return /:\/\/|(?:^|\s)[\w-]+(?:\.[\w-]+)+(?:[/:?#]|\s|$)|@/.test(label.trim());
}

/** Convert one line outside code blocks; inline code spans are escaped but otherwise left alone. */
function convertLine(line: string): string {
  const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
  if (heading) return `*${convertInline(heading[1] ?? '').replaceAll('*', '')}*`;
  if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) return '──────────';
  const quote = /^(\s*>\s?)(.*)$/.exec(line);
  if (quote) return `>${convertLine(quote[2] ?? '')}`;
  const bullet = /^(\s*)[-*+]\s+(.*)$/.exec(line);
  const prefix = bullet ? `${bullet[1] ?? ''}• ` : '';
  const body = bullet ? (bullet[2] ?? '') : line;
  const parts = body.split(/(`[^`\n]+`)/);
  return (
    prefix +
    parts
      .map((part) =>
        part.startsWith('`') && part.endsWith('`') && part.length > 1
          ? escapeMrkdwn(part)
          : convertInline(part),
      )
      .join('')
  );
}

/**
 * Convert GitHub-flavoured Markdown to Slack mrkdwn: `**bold**` → `*bold*`, `[t](u)` → `<u|t>`,
 * headings → bold lines, bullets → `•`, fenced code kept (language tag dropped), `&`, `<`, `>` escaped.
 * Everything else is escaped, Slack tokens included: text posted by Shepherd quotes logs, files and the
 * model, so `<!channel>`, `<!here>`, `<@U…>` or `<https://evil|https://good>` in it must not ping or
 * disguise a link. Shepherd's own posts never need a ping.
 */
export function markdownToMrkdwn(markdown: string): string {
  const output: string[] = [];
  let inFence = false;
  for (const line of markdown.replaceAll('\r\n', '\n').split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) {
      inFence = !inFence;
      output.push('```');
      continue;
    }
    output.push(inFence ? escapeMrkdwn(line) : convertLine(line));
  }
  if (inFence) output.push('```');
  return output.join('\n');
}

const FENCE = '```';

/**
 * Split mrkdwn into chunks of at most `limit` characters, preferring line boundaries and never leaving
 * a code fence open across chunks (it is closed at the end of one chunk and reopened in the next).
 */
export function splitMrkdwn(text: string, limit: number = SECTION_TEXT_LIMIT): string[] {
  // Room for a closing fence plus newline, and a reopening fence plus newline.
  const budget = limit - (FENCE.length + 1) * 2;
  if (budget < 16) throw new Error(`split limit too small: ${limit}`);
  const chunks: string[] = [];
  let current: string[] = [];
  let currentLength = 0;
  let inFence = false;
  let chunkOpensInFence = false;

  const flush = (): void => {
    if (current.length === 0) return;
    let chunk = current.join('\n');
    if (chunkOpensInFence) chunk = `${FENCE}\n${chunk}`;
    if (inFence) chunk = `${chunk}\n${FENCE}`;
    if (chunk.trim().length > 0) chunks.push(chunk);
    current = [];
    currentLength = 0;
    chunkOpensInFence = inFence;
  };

  const pushLine = (line: string): void => {
    const added = line.length + (current.length > 0 ? 1 : 0);
    if (currentLength + added > budget) flush();
    current.push(line);
    currentLength += line.length + (current.length > 1 ? 1 : 0);
  };

  for (const line of text.split('\n')) {
    if (line.length > budget) {
      // A single over-long line: hard-cut it, avoiding cuts inside an `&amp;`-style entity.
      let rest = line;
      while (rest.length > budget) {
        let cut = budget;
        const ampersand = rest.lastIndexOf('&', cut);
        if (ampersand > cut - 6 && ampersand > 0) cut = ampersand;
        pushLine(rest.slice(0, cut));
        flush();
        rest = rest.slice(cut);
      }
      if (rest.length > 0) pushLine(rest);
    } else {
      pushLine(line);
    }
    if (line.trim() === FENCE) inFence = !inFence;
  }
  flush();
  return chunks;
}
