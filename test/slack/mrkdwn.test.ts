import { describe, expect, it } from 'vitest';
import { markdownToMrkdwn, splitMrkdwn } from '../../src/bot/slack/mrkdwn.js';

describe('markdownToMrkdwn', () => {
  it('converts emphasis, links, headings and bullets', () => {
    expect(markdownToMrkdwn('**bold** and *it* and ~~gone~~')).toBe('*bold* and _it_ and ~gone~');
    expect(markdownToMrkdwn('see [the run](https://x.dev/r?a=1&b=2)')).toBe(
      'see <https://x.dev/r?a=1&b=2|the run>',
    );
    expect(markdownToMrkdwn('## Results ##')).toBe('*Results*');
    expect(markdownToMrkdwn('- one\n  * two')).toBe('• one\n  • two');
  });

  it('escapes &, <, > everywhere, so quoted text cannot ping; keeps block quotes', () => {
    expect(markdownToMrkdwn('a < b && c > d, ping <@U123> in <#C1|ops>')).toBe(
      'a &lt; b &amp;&amp; c &gt; d, ping &lt;@U123&gt; in &lt;#C1|ops&gt;',
    );
    expect(markdownToMrkdwn('> quoted **x**')).toBe('>quoted *x*');
  });

  it('turns no log line into a ping or a disguised link', () => {
    const log =
      'step 9 <!channel> <!here> <!everyone> <@U02ADMIN> <https://evil.example|https://good.example>';
    const out = markdownToMrkdwn(log);
    expect(out).not.toMatch(/<[!@#]|<https?:/);
    expect(out).toBe(
      'step 9 &lt;!channel&gt; &lt;!here&gt; &lt;!everyone&gt; &lt;@U02ADMIN&gt; &lt;https://evil.example|https://good.example&gt;',
    );
    // Also after a log line of three backticks that closes a fence early.
    expect(markdownToMrkdwn('```\nlog\n```\n<!channel> after')).toBe('```\nlog\n```\n&lt;!channel&gt; after');
    // A Markdown link whose label looks like an address shows the real target, not the label.
    expect(markdownToMrkdwn('[https://good.example](https://evil.example/x)')).toBe(
      '<https://evil.example/x>',
    );
    expect(markdownToMrkdwn('[docs.good.example](https://evil.example)')).toBe('<https://evil.example>');
    expect(markdownToMrkdwn('[x](javascript:alert(1))')).not.toContain('<javascript');
    // Placeholder characters in the input cannot smuggle a token back.
    expect(markdownToMrkdwn('[a](https://x.dev) \uE0000\uE000')).toBe('<https://x.dev|a> 0');
  });

  it('keeps code verbatim (escaped), drops the fence language', () => {
    expect(markdownToMrkdwn('```python\nif a < b: **x**\n```')).toBe('```\nif a &lt; b: **x**\n```');
    expect(markdownToMrkdwn('run `a**b<c` now')).toBe('run `a**b&lt;c` now');
    expect(markdownToMrkdwn('```\nunclosed')).toBe('```\nunclosed\n```');
  });
});

describe('splitMrkdwn', () => {
  it('keeps every chunk within the limit and loses nothing', () => {
    const text = Array.from({ length: 400 }, (_, index) => `line ${index} ${'z'.repeat(index % 50)}`).join(
      '\n',
    );
    const chunks = splitMrkdwn(text, 3000);
    expect(chunks.length).toBeGreaterThan(1);
    for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(3000);
    expect(chunks.join('\n')).toBe(text);
  });

  it('hard-cuts an over-long line', () => {
    const chunks = splitMrkdwn('q'.repeat(7000), 3000);
    for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(3000);
    expect(chunks.join('')).toBe('q'.repeat(7000));
  });

  it('closes and reopens a code fence across chunks', () => {
    const code = Array.from({ length: 200 }, (_, index) => `print(${index})${' '.repeat(20)}`).join('\n');
    const chunks = splitMrkdwn(`intro\n\`\`\`\n${code}\n\`\`\`\noutro`, 1000);
    expect(chunks.length).toBeGreaterThan(2);
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(1000);
      expect((chunk.match(/```/g) ?? []).length % 2).toBe(0);
    }
  });
});
