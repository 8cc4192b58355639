import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { CHROMIUM, hasChromium, launchChromium, openPage } from '../helpers/browser.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

const ANSWER = 'No runs yet: **nothing** is training.';

// The whole app with a scripted model that calls one tool, then answers; the page shows the turn's trace.
describe.skipIf(!hasChromium)(`turn trace in headless Chromium (needs ${CHROMIUM})`, () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let browser: Browser;

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'noted' } });
    shepherd = await startTestApp({
      environment: { SHEPHERD_LLM_BASE_URL: llm.url, SHEPHERD_LLM_MODEL: 'scripted-model' },
    });
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await shepherd?.stop();
    await llm?.close();
  }, 60_000);

  it('shows, collapsed under the answer, the LLM calls and the tool the turn called', async () => {
    llm.enqueue({ toolCalls: [{ name: 'list_training_runs', arguments: {} }] }, { text: ANSWER });
    const { page, pageErrors } = await openPage(browser);
    await page.goto(`${shepherd.url}/#ml-runs`);
    await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 10_000 });
    await page.fill('#composer-text', '@shepherd what is running?');
    await page.press('#composer-text', 'Enter');

    const answer = page.locator('.message.bot', { has: page.locator('strong', { hasText: 'nothing' }) });
    const trace = answer.locator('[data-testid="trace"]');
    await trace.waitFor({ timeout: 30_000 });
    // Collapsed by default: the steps are there but not shown.
    expect(await trace.evaluate((node) => (node as unknown as { open: boolean }).open)).toBe(false);
    const tool = trace.locator('li[data-tool="list_training_runs"]');
    expect(await tool.isVisible()).toBe(false);
    expect(await trace.locator('summary').textContent()).toMatch(/2 LLM calls · list_training_runs/);
    await trace.locator('summary').click();
    expect(await tool.isVisible()).toBe(true);
    expect(await tool.locator('.trace-name').textContent()).toBe('list_training_runs');
    expect(await trace.locator('li.llm .trace-name').first().textContent()).toBe('scripted-model');
    expect(await trace.locator('li.llm .trace-info').first().textContent()).toContain('10 in / 5 out tokens');

    // The same trace from the API.
    const threadId = await page.locator('.thread-link.active').getAttribute('data-thread-id');
    const response = await fetch(`${shepherd.url}/api/threads/${threadId}/turns`);
    const body = (await response.json()) as {
      turns: { outcome: string; steps: Record<string, unknown>[] }[];
    };
    expect(response.status).toBe(200);
    const turn = body.turns.at(-1);
    expect(turn?.outcome).toBe('answered');
    expect(turn?.steps.map((step) => [step.kind, step.kind === 'tool' ? step.name : step.model])).toEqual([
      ['llm', 'scripted-model'],
      ['tool', 'list_training_runs'],
      ['llm', 'scripted-model'],
    ]);
    expect(turn?.steps[1]).toMatchObject({ arguments: '{}', isError: false });
    expect((await fetch(`${shepherd.url}/api/threads/m999999/turns`)).status).toBe(404);
    expect(pageErrors).toEqual([]);
    await page.context().close();
  }, 90_000);

  it('offers recent users as "who am I" and resets the session from a button', async () => {
    const threadId = await shepherd.mention('@shepherd hello there', 'dora');
    await shepherd.waitForMessages(threadId, (all) => all.some((message) => message.user === 'shepherd'));
    const { page, pageErrors } = await openPage(browser);
    await page.goto(`${shepherd.url}/#ml-runs/${threadId}`);
    await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 10_000 });
    await page.locator('#recent-users option[value="dora"]').waitFor({ state: 'attached', timeout: 10_000 });
    expect(await page.locator('[data-testid="who-am-i"]').getAttribute('list')).toBe('recent-users');

    await page.fill('#user-name', 'dora');
    await page.locator('[data-testid="session-reset"]').click();
    await page
      .locator('.message.bot .text', { hasText: 'Fresh session, started by dora' })
      .waitFor({ timeout: 20_000 });
    const messages = await shepherd.messages(threadId);
    expect(messages.some((message) => message.user === 'dora' && message.text === '@shepherd reset')).toBe(
      true,
    );
    expect(pageErrors).toEqual([]);
    await page.context().close();
  }, 60_000);
});
