import { describe, expect, test } from 'vitest';
import { DISCORD_LIMITS, renderCard } from '../../src/bot/discord/cards.js';
import { mentionsUser, readableMentions, threadNameFrom } from '../../src/bot/discord/discord-mentions.js';
import { extractLongBlocks, splitContent } from '../../src/bot/discord/split-message.js';

describe('renderCard', () => {
  test('keeps every embed limit and the 6,000-character total', () => {
    const rendered = renderCard({
      title: 't'.repeat(400),
      text: 'd'.repeat(5_000),
      fields: Array.from({ length: 30 }, (_, index) => ({
        label: `n${index}`.repeat(100),
        value: 'v'.repeat(2_000),
      })),
    });
    const embed = rendered.embeds[0];
    expect(embed?.title?.length).toBe(DISCORD_LIMITS.embedTitle);
    expect(embed?.description?.length).toBeLessThanOrEqual(DISCORD_LIMITS.embedDescription);
    expect(embed?.fields?.length).toBeLessThanOrEqual(25);
    for (const field of embed?.fields ?? []) {
      expect(field.name.length).toBeLessThanOrEqual(256);
      expect(field.value.length).toBeLessThanOrEqual(1_024);
    }
    const total =
      (embed?.title?.length ?? 0) +
      (embed?.description?.length ?? 0) +
      (embed?.fields ?? []).reduce((sum, field) => sum + field.name.length + field.value.length, 0);
    expect(total).toBeLessThanOrEqual(6_000);
  });

  test('lays out buttons 5 per row, at most 5 rows, and rejects ids over 100 characters', () => {
    const actions = Array.from({ length: 27 }, (_, index) => ({
      actionId: `a:${index}`,
      label: `A${index}`,
    }));
    const rendered = renderCard({ title: 'x', actions });
    expect(rendered.components.map((row) => row.components.length)).toEqual([5, 5, 5, 5, 5]);
    expect(rendered.droppedActions).toBe(2);
    expect(() => renderCard({ actions: [{ actionId: 'x'.repeat(101), label: 'too long' }] })).toThrow(
      RangeError,
    );
  });

  test('a resolved card shows the outcome and has no buttons', () => {
    const rendered = renderCard({
      title: 'Approve?',
      fields: Array.from({ length: 25 }, (_, index) => ({ label: `f${index}`, value: 'v' })),
      actions: [{ actionId: 'approve:1', label: 'Approve' }],
      resolved: 'Approved by bob at 14:02',
    });
    expect(rendered.components).toEqual([]);
    expect(rendered.embeds[0]?.fields?.length).toBe(25);
    expect(rendered.embeds[0]?.fields?.at(-1)).toEqual({
      name: 'Outcome',
      value: 'Approved by bob at 14:02',
    });
  });
});

describe('splitContent', () => {
  test('splits at line ends and keeps code fences balanced', () => {
    const code = Array.from({ length: 120 }, (_, index) => `print(${index}) # ${'x'.repeat(20)}`).join('\n');
    const text = `Here is the script:\n\`\`\`py\n${code}\n\`\`\`\nDone.`;
    const chunks = splitContent(text);
    expect(chunks.length).toBeGreaterThan(1);
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(2_000);
      expect((chunk.match(/```/g) ?? []).length % 2).toBe(0);
    }
    expect(chunks[1]?.startsWith('```py\n')).toBe(true);
  });

  test('cuts a single over-long line hard', () => {
    const chunks = splitContent('y'.repeat(4_500));
    expect(chunks.map((chunk) => chunk.length)).toEqual([2_000, 2_000, 500]);
  });
});

describe('extractLongBlocks', () => {
  test('a long log becomes a file with its tail inline and a cut note', () => {
    const log = Array.from({ length: 300 }, (_, index) => `step ${index} loss 0.${index}`).join('\n');
    const result = extractLongBlocks(`The run failed:\n\`\`\`\n${log}\n\`\`\``);
    expect(result.files).toHaveLength(1);
    expect(result.files[0]?.name).toBe('log-1.txt');
    expect(new TextDecoder().decode(result.files[0]?.data)).toBe(log);
    expect(result.text).toContain('step 299 loss');
    expect(result.text).not.toContain('step 0 loss');
    expect(result.text).toContain('full text in `log-1.txt`');
  });

  test('a long diff keeps its head and becomes a .diff file; short blocks stay inline', () => {
    const diff = [
      '--- a/train.py',
      '+++ b/train.py',
      ...Array.from({ length: 200 }, (_, i) => `+line ${i}`),
    ].join('\n');
    const result = extractLongBlocks(`\`\`\`diff\n${diff}\n\`\`\`\n\`\`\`\nshort\n\`\`\``);
    expect(result.files.map((file) => file.name)).toEqual(['diff-1.diff']);
    expect(result.text).toContain('--- a/train.py');
    expect(result.text).toContain('```\nshort\n```');
  });
});

describe('inbound text', () => {
  test('mentions read as @names and thread names drop them', () => {
    expect(mentionsUser('<@!42> hi', '42')).toBe(true);
    expect(mentionsUser('<@421> hi', '42')).toBe(false);
    expect(readableMentions('<@42> ask <@7>', new Map([['42', 'shepherd']]))).toBe('@shepherd ask <@7>');
    expect(threadNameFrom('<@42>   fine-tune   **Qwen**', 'fallback')).toBe('fine-tune Qwen');
    expect(threadNameFrom('<@42>', 'shepherd session')).toBe('shepherd session');
    const long = threadNameFrom(`<@42> ${'word '.repeat(60)}`, 'x');
    expect(long.length).toBeLessThanOrEqual(100);
    expect(long.endsWith('…')).toBe(true);
  });
});
