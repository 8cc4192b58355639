import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';

/**
 * Issue 26 §6: the app harness asserts HTTP statuses. It used to read `body.messages` whatever the status,
 * so a server error turned into a predicate over `undefined` and, under load, into a 20 s timeout.
 */
describe('the app harness', () => {
  let shepherd: TestApp;
  beforeAll(async () => {
    shepherd = await startTestApp({ environment: { SHEPHERD_LLM_BASE_URL: 'http://127.0.0.1:9/v1' } });
  });
  afterAll(() => shepherd.stop());

  it('fails at once, with the status, when the thread read is refused', async () => {
    const started = Date.now();
    await expect(shepherd.messages('not a thread')).rejects.toThrow(/HTTP 4\d\d/);
    await expect(shepherd.waitForMessages('not a thread', () => true)).rejects.toThrow(/HTTP 4\d\d/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('reads a real thread', async () => {
    const threadId = await shepherd.mention('help');
    const messages = await shepherd.waitForMessages(threadId, (all) => all.length >= 2);
    expect(messages[0]?.text).toContain('help');
  });
});
