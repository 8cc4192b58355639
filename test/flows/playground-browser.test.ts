import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { CHROMIUM, hasChromium, launchChromium, openPage } from '../helpers/browser.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

const QUESTION = '@shepherd how is browser-run doing?';
const ANSWER = 'browser-run looks healthy: the loss is still falling.';

// The whole app (real Redis, BullMQ workers, local executor, scripted LLM) driven through its page.
// Without Chromium this suite reports as skipped under this name; install it with `apt-get install -y chromium`.
describe.skipIf(!hasChromium)(
  `playground page on the real app in headless Chromium (needs ${CHROMIUM})`,
  () => {
    let llm: ScriptedLlmServer;
    let shepherd: TestApp;
    let browser: Browser;

    beforeAll(async () => {
      llm = await startScriptedOpenAi();
      // Only the question gets the scripted answer; any other turn (e.g. the approval event) gets "noted".
      llm.setHandler((request) =>
        request.lastUserText?.includes('how is browser-run doing') ? { text: ANSWER } : { text: 'noted' },
      );
      shepherd = await startTestApp({
        environment: {
          SHEPHERD_LLM_BASE_URL: llm.url,
          SHEPHERD_WORKSPACE: process.cwd(),
          SHEPHERD_SELF_APPROVAL: 'false',
          SHEPHERD_STOP_GRACE_S: '2',
        },
        overrides: { runEnvironment: { ...process.env, HEALTHY_STEPS: '30', HEALTHY_SLEEP: '0.05' } },
      });
      browser = await launchChromium();
    }, 60_000);

    afterAll(async () => {
      await browser?.close();
      if (shepherd !== undefined) {
        for (const run of await shepherd.app.features.runs.list()) {
          if (run.status === 'running' || run.status === 'queued') {
            await shepherd.app.features.runs.service.stop(run.id, 'system').catch(() => undefined);
          }
        }
        await shepherd.stop();
      }
      await llm?.close();
    }, 60_000);

    it('launches a run from the page, approves it as bob, and shows the model answer live', async () => {
      const { page, pageErrors } = await openPage(browser);

      await page.goto(`${shepherd.url}/`);
      await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 10_000 });
      await page.fill(
        '#composer-text',
        '@shepherd run test/fixtures/healthy_train.py --gpus 0 --name browser-run',
      );
      await page.press('#composer-text', 'Enter');

      // The approval card arrives over Server-Sent Events, without a reload.
      const card = page.locator('.card', { has: page.locator('h3', { hasText: 'browser-run' }) });
      const approve = card.locator('button.action', { hasText: 'Approve' });
      await approve.waitFor({ timeout: 20_000 });
      expect(await card.locator('dt').allTextContents()).toEqual(
        expect.arrayContaining(['Requested by', 'GPUs']),
      );

      // Team policy: alice may not approve her own run; the page shows the core's refusal inline.
      await approve.click();
      await card.locator('.card-note.error', { hasText: /own job/ }).waitFor({ timeout: 10_000 });

      await page.fill('#user-name', 'bob');
      await approve.click();
      await card.locator('.outcome', { hasText: 'Approved by bob' }).waitFor({ timeout: 20_000 });
      expect(await card.locator('button.action').count()).toBe(0);
      await page
        .locator('.message.bot .text', { hasText: /browser-run is running/ })
        .waitFor({ timeout: 20_000 });
      const run = await shepherd.app.features.runs.find('browser-run');
      expect(run.requester.name).toBe('alice');

      // A mention the scripted model answers, in the same thread.
      await page.fill('#user-name', 'alice');
      await page.fill('#composer-text', QUESTION);
      await page.press('#composer-text', 'Enter');
      await page.locator('.message.bot .text', { hasText: ANSWER }).waitFor({ timeout: 20_000 });
      expect(llm.requests.some((request) => request.lastUserText?.includes('how is browser-run doing'))).toBe(
        true,
      );

      // The page shows what the API serves: one thread holding the command, the card and the answer.
      const threadId = await page.locator('.thread-link.active').getAttribute('data-thread-id');
      expect(threadId).not.toBeNull();
      const messages = await shepherd.messages(threadId ?? '');
      expect(messages[0]?.text).toContain('--name browser-run');
      expect(messages.some((message) => message.card?.resolved?.startsWith('Approved by bob'))).toBe(true);
      expect(messages.some((message) => message.user === 'shepherd' && message.text === ANSWER)).toBe(true);
      expect(pageErrors).toEqual([]);
      await page.context().close();
    }, 90_000);
  },
);
