import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, hasChromium, launchChromium, openPage } from '../helpers/browser.js';
import { type Playground, startPlayground } from './playground-fixture.js';

const ANSWER = [
  '## Plan',
  '',
  'I will run **tiny-train** with `lr=3e-4`:',
  '',
  '- step one',
  '- step two',
  '',
  '| metric | value |',
  '| --- | --- |',
  '| loss | 0.42 |',
  '',
  '```python',
  'print("hi")',
  '```',
  '',
  'See [the docs](https://example.com/docs) and [bad](javascript:window.__pwned=1).',
  '',
  '<img src=x onerror="window.__pwned=2"><script>window.__pwned=3</script>',
  '<b onclick="window.__pwned=4">raw bold</b>',
].join('\n');

// Without Chromium this suite reports as skipped under this name; install it with `apt-get install -y chromium`.
describe.skipIf(!hasChromium)(`playground Markdown in headless Chromium (needs ${CHROMIUM})`, () => {
  let playground: Playground;
  let browser: Browser;

  beforeAll(async () => {
    playground = await startPlayground('web-markdown');
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await playground?.close();
  });

  it("renders the agent's Markdown and leaves injected markup inert", async () => {
    const { adapter, handlers } = playground;
    handlers.onMessageHook = (message) => {
      if (message.addressed) setTimeout(() => void adapter.postMessage(message.threadId, ANSWER), 50);
    };
    const { page, pageErrors } = await openPage(browser);
    await page.goto(`${playground.url}/`);
    await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 10_000 });
    await page.fill('#composer-text', '@shepherd plan **this** <i>please</i>');
    await page.press('#composer-text', 'Enter');

    const answer = page.locator('.message.bot .text');
    await answer.waitFor({ timeout: 10_000 });
    expect(await answer.locator('h2').textContent()).toBe('Plan');
    expect(await answer.locator('strong').first().textContent()).toBe('tiny-train');
    expect(await answer.locator('p code').first().textContent()).toBe('lr=3e-4');
    expect(await answer.locator('li').allTextContents()).toEqual(['step one', 'step two']);
    expect(await answer.locator('table td').allTextContents()).toEqual(['loss', '0.42']);
    expect(await answer.locator('pre code').textContent()).toBe('print("hi")\n');

    const link = answer.locator('a', { hasText: 'the docs' });
    expect(await link.getAttribute('href')).toBe('https://example.com/docs');
    expect(await link.getAttribute('rel')).toBe('noopener noreferrer');
    expect(await link.getAttribute('target')).toBe('_blank');
    // A javascript: link is not a link at all.
    expect(await answer.locator('a').count()).toBe(1);

    // Raw HTML is shown as text, never parsed: no element, no handler, nothing ran.
    expect(await answer.locator('img, script, b').count()).toBe(0);
    expect(await answer.textContent()).toContain('<img src=x onerror=');
    expect(await answer.textContent()).toContain('<b onclick=');
    await answer.locator('p', { hasText: 'raw bold' }).click();
    expect(await page.evaluate(() => (globalThis as { __pwned?: number }).__pwned)).toBeUndefined();

    // People's own messages are shown exactly as typed, not as Markdown.
    const mine = page.locator('.message:not(.bot) .text');
    expect(await mine.textContent()).toBe('@shepherd plan **this** <i>please</i>');
    expect(await mine.locator('i, strong').count()).toBe(0);
    expect(pageErrors).toEqual([]);
    await page.context().close();
  });
});
