import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, hasChromium, launchChromium, openPage } from '../helpers/browser.js';
import { type Playground, startPlayground } from './playground-fixture.js';

// Without Chromium this suite reports as skipped under this name; install it with `apt-get install -y chromium`.
describe.skipIf(!hasChromium)(`playground page in headless Chromium (needs ${CHROMIUM})`, () => {
  let playground: Playground;
  let browser: Browser;

  beforeAll(async () => {
    playground = await startPlayground('web-page');
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await playground?.close();
  });

  it('posts a mention, shows the reply live, and resolves a card through its button', async () => {
    const { adapter, handlers } = playground;
    // The fake core: a mention gets a reply and an approval card; an accepted click resolves the card.
    handlers.onMessageHook = (message) => {
      if (!message.addressed) return;
      setTimeout(async () => {
        await adapter.postMessage(message.threadId, `Hi ${message.user.name}, here is the plan.`);
        await adapter.postCard(message.threadId, {
          title: 'Approve run tiny-train?',
          text: `requested by ${message.user.name}`,
          fields: [{ label: 'GPUs', value: '0' }],
          actions: [
            { actionId: 'approve:ap_1', label: 'Approve', style: 'primary' },
            { actionId: 'reject:ap_1', label: 'Reject', style: 'danger' },
          ],
        });
      }, 50);
    };
    handlers.onActionHook = (action) => {
      if (handlers.actionOutcome.status !== 'accepted') return;
      void adapter.updateCard(action.threadId, action.messageId, {
        title: 'Approve run tiny-train?',
        resolved: `Approved by ${action.user.name}`,
      });
    };

    const { page, pageErrors } = await openPage(browser);

    await page.goto(`${playground.url}/`);
    await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 10_000 });
    await page.fill('#composer-text', '@shepherd run examples/tiny_train.py --gpus 0');
    await page.press('#composer-text', 'Enter');

    // The reply and the card arrive over Server-Sent Events, without a reload.
    await page
      .locator('.message.bot .text', { hasText: 'Hi alice, here is the plan.' })
      .waitFor({ timeout: 10_000 });
    const approve = page.locator('button[data-action-id="approve:ap_1"]');
    await approve.waitFor({ timeout: 10_000 });
    expect(await page.locator('.card h3').textContent()).toBe('Approve run tiny-train?');
    expect(await page.locator('.card dd').textContent()).toBe('0');
    expect(await page.locator('.thread-link .preview').first().textContent()).toContain(
      '@shepherd run examples',
    );

    // Team policy says no self-approval: the page shows the core's 403 text inline.
    handlers.actionOutcome = { status: 'forbidden', message: 'you cannot approve your own run' };
    await approve.click();
    await page
      .locator('.card-note.error', { hasText: 'you cannot approve your own run' })
      .waitFor({ timeout: 10_000 });

    // Bob approves.
    await page.fill('#user-name', 'bob');
    handlers.actionOutcome = { status: 'accepted', message: 'Approved.' };
    await approve.click();
    await page.locator('.card .outcome', { hasText: 'Approved by bob' }).waitFor({ timeout: 10_000 });
    expect(await page.locator('button[data-action-id]').count()).toBe(0);

    expect(handlers.messages[0]).toMatchObject({
      addressed: true,
      startsThread: true,
      user: { id: 'alice', name: 'alice' },
    });
    expect(handlers.actions.map((action) => [action.user.id, action.actionId])).toEqual([
      ['alice', 'approve:ap_1'],
      ['bob', 'approve:ap_1'],
    ]);
    expect(handlers.actions[1]?.threadId).toBe(handlers.messages[0]?.threadId);
    expect(pageErrors).toEqual([]);
    await page.context().close();
  });

  it('shows the whole script behind a long approval card as an expandable block, as text', async () => {
    const { adapter, handlers } = playground;
    const script = `${Array.from({ length: 60 }, (_, index) => `x_${index} = ${index}`).join('\n')}\n# </pre><img src=x onerror="window.pwned=1">\n`;
    handlers.onMessageHook = (message) => {
      if (!message.addressed) return;
      setTimeout(() => {
        void adapter.postCard(message.threadId, {
          title: 'Approve run long-train?',
          text: 'train.py (first lines of 61):\n```\nx_0 = 0\n```',
          attachment: { filename: 'r-1-train.py', text: script },
          actions: [{ actionId: 'approve:ap_2', label: 'Approve', style: 'primary' }],
        });
      }, 50);
    };
    handlers.onActionHook = () => undefined;
    const { page, pageErrors } = await openPage(browser);
    await page.goto(`${playground.url}/`);
    await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 10_000 });
    await page.fill('#composer-text', '@shepherd run long.py');
    await page.press('#composer-text', 'Enter');
    const details = page.locator('.card details.card-attachment').last();
    await details.waitFor({ timeout: 10_000 });
    expect(await details.locator('summary').textContent()).toBe('Show all of r-1-train.py');
    expect(await details.locator('pre').isVisible()).toBe(false);
    await details.locator('summary').click();
    expect(await details.locator('pre').isVisible()).toBe(true);
    expect(await details.locator('pre').textContent()).toBe(script);
    expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
    expect(pageErrors).toEqual([]);
    await page.context().close();
  });

  it('Edit opens an inline form with the note; values it cannot use reopen it under the error', async () => {
    const { adapter, handlers } = playground;
    handlers.onMessageHook = (message) => {
      if (!message.addressed) return;
      setTimeout(() => {
        void adapter.postCard(message.threadId, {
          title: 'Approve run edit-me?',
          text: 'requested by alice',
          actions: [
            { actionId: 'approve:ap_3', label: 'Approve', style: 'primary' },
            { actionId: 'edit:ap_3', label: 'Edit', style: 'default' },
          ],
        });
      }, 50);
    };
    handlers.onActionHook = () => undefined;
    handlers.form = {
      title: 'Edit (numbers only)',
      submitLabel: 'Approve',
      note: 'The script is longer than a form here takes.',
      fields: [
        { id: 'gpus', label: 'GPUs', initial: '2', maxLength: 4 },
        { id: 'name', label: 'Run name', initial: 'edit-me', maxLength: 60 },
      ],
    };
    const { page, pageErrors } = await openPage(browser);
    await page.goto(`${playground.url}/`);
    await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 10_000 });
    await page.fill('#user-name', 'bob');
    await page.fill('#composer-text', '@shepherd run edit.py');
    await page.press('#composer-text', 'Enter');
    await page.locator('button[data-action-id="edit:ap_3"]').click();
    const form = page.locator('.card-form');
    await form.waitFor({ timeout: 10_000 });
    expect(await form.locator('.card-form-note').textContent()).toBe(
      'The script is longer than a form here takes.',
    );
    expect(await form.locator('input[name="gpus"]').inputValue()).toBe('2');

    handlers.actionOutcome = { status: 'invalid', message: 'not applied: GPUs must be a whole number ≥ 0' };
    await form.locator('input[name="gpus"]').fill('-1');
    await form.locator('button[type="submit"]').click();
    await page
      .locator('.card-note.error', { hasText: 'GPUs must be a whole number' })
      .waitFor({ timeout: 10_000 });
    expect(await page.locator('.card-form input[name="gpus"]').inputValue()).toBe('-1');

    handlers.actionOutcome = { status: 'accepted', message: 'approved with edits' };
    await page.locator('.card-form input[name="gpus"]').fill('1');
    await page.locator('.card-form button[type="submit"]').click();
    await page.locator('.card-note', { hasText: 'approved with edits' }).waitFor({ timeout: 10_000 });
    expect(handlers.actions.slice(-2).map((action) => action.values)).toEqual([
      { gpus: '-1', name: 'edit-me' },
      { gpus: '1', name: 'edit-me' },
    ]);
    delete handlers.form;
    expect(pageErrors).toEqual([]);
    await page.context().close();
  });

  it('DM mode: the toggle opens a conversation with the bot where every message, unmentioned, is one session', async () => {
    const { adapter, handlers } = playground;
    handlers.onMessageHook = (message) => {
      if (!message.addressed) return;
      setTimeout(() => void adapter.postMessage(message.threadId, `echo: ${message.text}`), 20);
    };
    const { page, pageErrors } = await openPage(browser);
    await page.goto(`${playground.url}/`);
    await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 10_000 });
    await page.fill('#user-name', 'Dana Q');
    await page.click('[data-testid="dm-toggle"]');
    expect(await page.getAttribute('[data-testid="dm-toggle"]', 'aria-pressed')).toBe('true');
    expect(await page.locator('#thread-head').textContent()).toContain('DM with @shepherd');

    for (const text of ['runs', 'status please']) {
      await page.fill('#composer-text', text);
      await page.press('#composer-text', 'Enter');
      await page.locator('.message.bot .text', { hasText: `echo: ${text}` }).waitFor({ timeout: 10_000 });
    }
    const direct = handlers.messages.filter((message) => message.threadId.startsWith('web:dm.dana-q:'));
    expect(direct.map((message) => [message.text, message.addressed])).toEqual([
      ['runs', true],
      ['status please', true],
    ]);
    expect(new Set(direct.map((message) => message.threadId)).size).toBe(1);

    // Toggling off goes back to a channel; toggling on again reopens the same conversation.
    await page.click('[data-testid="dm-toggle"]');
    expect(await page.getAttribute('[data-testid="dm-toggle"]', 'aria-pressed')).toBe('false');
    await page.click('[data-testid="dm-toggle"]');
    await page.locator('.message.bot .text', { hasText: 'echo: status please' }).waitFor({ timeout: 10_000 });
    expect(pageErrors).toEqual([]);
  });
});
