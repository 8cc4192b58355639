/**
 * Issue 24, approvals people can shape: Edit on an approval card, through the playground HTTP API with the
 * scripted LLM. Edit opens a pre-filled form for an approver only (anyone else gets Approve's refusal); a
 * bad value is refused with a message and decides nothing; the submitted edit approves the run, which
 * starts with the edited GPUs, hours, name and script; the card says "with edits" and shows the diff, the
 * audit keeps the before and the after, and the agent hears of the edits.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app-harness.js';
import { expectEditedRun } from '../helpers/approval-edits.js';
import { agentLaunchCard, type ScriptedAgentApp, startScriptedAgentApp } from '../helpers/approval-flows.js';
import { actionOf, cardsTitled } from '../helpers/flow.js';

describe('edit then approve (playground, scripted LLM)', () => {
  let app: ScriptedAgentApp;
  let shepherd: TestApp;

  beforeAll(async () => {
    app = await startScriptedAgentApp({
      SHEPHERD_GPUS: '2',
      SHEPHERD_APPROVERS: 'bob',
      SHEPHERD_MAX_HOURS: '4',
      SHEPHERD_DEFAULT_MAX_HOURS: '1',
    });
    shepherd = app.shepherd;
  });
  afterAll(() => app?.stop());

  it('an approver edits GPUs, hours, name and script, and the run starts with them', async () => {
    const { threadId, card, script } = await agentLaunchCard(app, 'big-edit');
    const edit = actionOf(card, 'Edit');
    expect(edit).toMatch(/^edit:ap_/);
    const click = (user: string, extra: Record<string, unknown>) =>
      shepherd.click(threadId, card?.id ?? '', edit, user, extra);

    // Someone who may not approve gets no form, and the same refusal Approve gives.
    const carol = await click('carol', { openForm: true });
    expect(carol.status).toBe(403);
    expect(String(carol.body.error)).toContain('only approvers (bob) can approve');

    const opened = await click('bob', { openForm: true });
    expect(opened.status).toBe(200);
    const form = opened.body.form as { fields: Array<{ id: string; initial?: string }> };
    expect(form.fields.map((field) => [field.id, field.initial])).toEqual([
      ['gpus', '2'],
      ['hours', '1'],
      ['name', 'big-edit'],
      ['script', script],
    ]);

    // A bad value: a message, nothing decided, the card still open.
    const bad = await click('bob', { values: { gpus: '-1', hours: '1', name: 'big-edit', script } });
    expect(bad.status).toBe(422);
    expect(String(bad.body.error)).toContain('GPUs must be a whole number');
    const tooMany = await click('bob', { values: { gpus: '3', hours: '1', name: 'big-edit', script } });
    expect(tooMany.status).toBe(422);
    expect(String(tooMany.body.error)).toContain('this host has 2');
    const tooLong = await click('bob', { values: { gpus: '1', hours: '9', name: 'big-edit', script } });
    expect(tooLong.status).toBe(422);
    expect(String(tooLong.body.error)).toContain('above this deployment');
    const broken = await click('bob', { values: { gpus: '1', hours: '1', name: 'x', script: 'def (' } });
    expect(broken.status).toBe(422);
    expect(String(broken.body.error)).toContain('does not compile');
    expect((await shepherd.app.features.runs.find('big-edit')).status).toBe('pending_approval');
    expect(cardsTitled(await shepherd.messages(threadId), 'big-edit')[0]?.card?.resolved).toBeUndefined();

    const before = app.llm.requests.length;
    app.agentSteps.push({ text: 'noted the edits' });
    const edited = `${script}# edited by bob\n`;
    const submitted = await click('bob', {
      values: { gpus: '1', hours: '0.5', name: 'Small Edit', script: edited },
    });
    expect(submitted.status).toBe(200);
    expect(submitted.body.message).toBe('approved with edits');

    const after = await shepherd.waitForMessages(threadId, (all) =>
      all.some((message) => message.text.includes('noted the edits')),
    );
    const resolved = cardsTitled(after, 'big-edit')[0]?.card;
    expect(resolved?.resolved).toMatch(/^Approved by bob with edits at \d\d:\d\d UTC$/);
    expect(resolved?.text).toContain('GPUs: 2 → 1');
    expect(resolved?.text).toContain('max hours: 1 → 0.5');
    expect(resolved?.text).toContain('name: big-edit → small-edit');
    expect(resolved?.text).toContain('+# edited by bob');
    await expectEditedRun(shepherd, {
      name: 'small-edit',
      gpus: 1,
      maxHours: 0.5,
      before: { gpus: 2, maxHours: 1, name: 'big-edit' },
      by: 'bob',
      scriptLine: '# edited by bob',
    });
    const next = app.llm.requests.slice(before).map((request) => request.lastUserText ?? '');
    expect(next.some((text) => text.includes('approved by bob with edits (GPUs: 2 → 1'))).toBe(true);
  }, 90_000);

  it('a script-change card edits the proposed script, hours and name (not GPUs); the run restarts with them', async () => {
    const threadId = await shepherd.mention(
      'run test/fixtures/crash_train.py --gpus 0 --name crashy',
      'alice',
    );
    const first = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'crashy').length > 0);
    const startCard = cardsTitled(first, 'crashy')[0];
    const approve = actionOf(startCard, 'Approve');
    expect((await shepherd.click(threadId, startCard?.id ?? '', approve, 'bob')).status).toBe(200);
    const deadline = Date.now() + 20_000;
    while ((await shepherd.app.features.runs.find('crashy')).status !== 'failed') {
      if (Date.now() > deadline) throw new Error('crashy did not fail');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    const crash = readFileSync('test/fixtures/crash_train.py', 'utf8');
    const proposed = crash.replace('if step == 3:', 'if step == 99:');
    app.agentSteps.push(
      {
        toolCalls: [
          { name: 'update_script', arguments: { run: 'crashy', script: proposed, reason: 'skip the crash' } },
        ],
      },
      { text: 'change proposed' },
    );
    await shepherd.reply(threadId, '@shepherd fix it', 'alice');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Approve script change: crashy').length > 0,
    );
    const card = cardsTitled(messages, 'Approve script change: crashy')[0];
    const edit = actionOf(card, 'Edit');
    const opened = await shepherd.click(threadId, card?.id ?? '', edit, 'bob', { openForm: true });
    expect(opened.status).toBe(200);
    const form = opened.body.form as { fields: Array<{ id: string; initial?: string }> };
    expect(form.fields.map((field) => [field.id, field.initial])).toEqual([
      ['hours', '1'],
      ['name', 'crashy'],
      ['script', proposed],
    ]);

    const edited = `${proposed}# edited by bob on the change\n`;
    const submitted = await shepherd.click(threadId, card?.id ?? '', edit, 'bob', {
      values: { hours: '2', name: 'crashy-fixed', script: edited },
    });
    expect(submitted.status).toBe(200);
    const after = await shepherd.waitForMessages(threadId, (all) =>
      Boolean(cardsTitled(all, 'Approve script change: crashy')[0]?.card?.resolved),
    );
    const resolved = cardsTitled(after, 'Approve script change: crashy')[0]?.card;
    expect(resolved?.resolved).toMatch(/^Approved by bob with edits at/);
    expect(resolved?.text).toContain('name: crashy → crashy-fixed');
    expect(resolved?.text).toContain('+# edited by bob on the change');
    await expectEditedRun(shepherd, {
      name: 'crashy-fixed',
      gpus: 0,
      maxHours: 2,
      before: { gpus: 0, maxHours: 1, name: 'crashy' },
      by: 'bob',
      scriptLine: '# edited by bob on the change',
      editedWhile: 'failed',
    });
  }, 90_000);
});
