/**
 * A fenced code block for chat whose content cannot end it: a line of three backticks in a log would
 * otherwise close the fence and let the rest render as markup (links, mentions, headings). Backtick runs
 * are broken with zero-width spaces, which read the same. Slack also gets `&`, `<`, `>` escaped by its
 * adapter, and Discord posts with no allowed mentions, so nothing inside can ping either.
 */
export function codeBlock(text: string, language = ''): string {
  const safe = text.replace(/`{3,}/g, (run) => run.split('').join('\u200b'));
  return `\`\`\`${language}\n${safe}\n\`\`\``;
}
