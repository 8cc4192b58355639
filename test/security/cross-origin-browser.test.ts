import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { CHROMIUM, hasChromium, launchChromium, openPage } from '../helpers/browser.js';
import { cardsTitled } from '../helpers/flow.js';

/*
 * Issue 10 item 1, as an attacker does it: a page on another origin, opened in a real browser, POSTs
 * `text/plain` (no CORS preflight) to the playground's /api/actions to approve a pending run as "bob",
 * and opens its event stream. On the old main the run was approved.
 */
describe.skipIf(!hasChromium)(`a cross-origin page in headless Chromium (needs ${CHROMIUM})`, () => {
  let shepherd: TestApp;
  let browser: Browser;
  let attacker: Server;
  let attackerUrl: string;

  beforeAll(async () => {
    shepherd = await startTestApp({
      environment: { SHEPHERD_GPUS: '2', SHEPHERD_WORKSPACE: process.cwd(), SHEPHERD_APPROVERS: 'bob' },
    });
    attacker = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end('<!doctype html><html><body><p>cute cats</p></body></html>');
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    // Another port on another name: a different origin from the playground's http://127.0.0.1:<port>.
    attackerUrl = `http://localhost:${(attacker.address() as AddressInfo).port}/`;
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => attacker?.close(resolve));
    await shepherd?.stop();
  });

  it('cannot approve a pending run or read the event stream', async () => {
    const threadId = await shepherd.mention(
      'run test/fixtures/healthy_train.py --gpus 1 --name target',
      'alice',
    );
    const messages = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'target').length > 0);
    const card = cardsTitled(messages, 'target')[0];
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect(approve).toBeDefined();

    const { page } = await openPage(browser);
    await page.goto(attackerUrl);
    const outcome = await page.evaluate(
      async ({ target, body }) => {
        const results: string[] = [];
        // A "simple" request: no preflight, the browser sends it and hides the answer.
        await fetch(`${target}/api/actions`, {
          method: 'POST',
          mode: 'no-cors',
          headers: { 'content-type': 'text/plain' },
          body,
        }).then(
          () => results.push('fetch sent'),
          (error: unknown) => results.push(`fetch failed: ${String(error)}`),
        );
        const streamed = await new Promise<string>((resolve) => {
          const source = new EventSource(`${target}/api/events`);
          source.onopen = () => resolve('stream open');
          source.onerror = () => resolve('stream refused');
          setTimeout(() => resolve('stream timeout'), 5000);
        });
        results.push(streamed);
        return results;
      },
      {
        target: shepherd.url,
        body: JSON.stringify({ threadId, messageId: card?.id, actionId: approve?.actionId, user: 'bob' }),
      },
    );
    expect(outcome).toContain('stream refused');

    // Give a wrongly accepted click every chance to land before looking.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect((await shepherd.app.features.runs.find('target')).status).toBe('pending_approval');
    const after = cardsTitled(await shepherd.messages(threadId), 'target')[0];
    expect(after?.card?.resolved).toBeUndefined();

    // The same click from the playground itself (same origin, JSON) still works.
    const own = await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob');
    expect(own.status).toBe(200);
    await expect
      .poll(async () => (await shepherd.app.features.runs.find('target')).status, {
        timeout: 20_000,
      })
      .not.toBe('pending_approval');
    const run = await shepherd.app.features.runs.find('target');
    if (run.status === 'running' || run.status === 'queued')
      await shepherd.app.features.runs.service.stop(run.id, 'system');
  }, 90_000);
});
