/**
 * Issue 24, approvals people can shape, through the playground HTTP API with the scripted LLM: Reject opens
 * a reason form for someone whose click counts (nobody else gets one), the card shows the reason, and the
 * agent that asked for the card reads it in its next turn's request.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app-harness.js';
import { agentLaunchCard, type ScriptedAgentApp, startScriptedAgentApp } from '../helpers/approval-flows.js';
import { actionOf, cardsTitled } from '../helpers/flow.js';

describe('reject with a reason (playground, scripted LLM)', () => {
  let app: ScriptedAgentApp;
  let shepherd: TestApp;

  beforeAll(async () => {
    app = await startScriptedAgentApp({ SHEPHERD_GPUS: '2', SHEPHERD_APPROVERS: 'bob' });
    shepherd = app.shepherd;
  });
  afterAll(() => app?.stop());

  it('the reason is asked in a form, shown on the card and given to the agent as its next input', async () => {
    const { threadId, card } = await agentLaunchCard(app, 'big-run');
    const reject = actionOf(card, 'Reject');
    expect(reject).toMatch(/^reject:/);

    // Someone whose click would not count gets no form: the click is refused as before.
    const carol = await shepherd.click(threadId, card?.id ?? '', reject, 'carol', { openForm: true });
    expect(carol.status).toBe(403);
    expect(String(carol.body.error)).toContain('only approvers (bob)');

    const opened = await shepherd.click(threadId, card?.id ?? '', reject, 'bob', { openForm: true });
    expect(opened.status).toBe(200);
    const form = opened.body.form as { title: string; fields: Array<{ id: string; optional?: boolean }> };
    expect(form.title).toBe('Reject');
    expect(form.fields).toEqual([expect.objectContaining({ id: 'reason', optional: true })]);
    // Opening the form decided nothing.
    expect((await shepherd.app.features.runs.find('big-run')).status).toBe('pending_approval');

    const before = app.llm.requests.length;
    app.agentSteps.push({ text: 'revised: 1 GPU, bf16' });
    const submitted = await shepherd.click(threadId, card?.id ?? '', reject, 'bob', {
      values: { reason: '  use 1 GPU\nand bf16 ' },
    });
    expect(submitted.status).toBe(200);
    const after = await shepherd.waitForMessages(threadId, (all) =>
      all.some((message) => message.text.includes('revised: 1 GPU, bf16')),
    );
    expect(cardsTitled(after, 'big-run')[0]?.card?.resolved).toMatch(
      /^Rejected by bob at \d\d:\d\d UTC: use 1 GPU and bf16$/,
    );
    expect((await shepherd.app.features.runs.find('big-run')).status).toBe('rejected');
    const next = app.llm.requests.slice(before).map((request) => request.lastUserText ?? '');
    expect(next.some((text) => text.includes('rejected by bob: use 1 GPU and bf16'))).toBe(true);
  }, 90_000);
});
