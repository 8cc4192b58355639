/**
 * The Edit form of an approval card, per surface: pre-filled values, the script only where the platform's
 * input takes it (Slack 3,000, Discord 4,000 characters) and never when it holds a secret, and no form for
 * someone who may not approve. The store is a stub: the form provider only reads the card and decision.
 */
import { describe, expect, it } from 'vitest';
import { createEditFormProvider } from '../../src/approvals/approval-edits.js';
import type { Approval, ApprovalStore } from '../../src/approvals/approval-store.js';
import { modalOf } from '../../src/bot/discord/discord-forms.js';
import { formView } from '../../src/bot/slack/slack-forms.js';

const now = new Date('2026-12-07T00:00:00Z');
const approval: Approval = {
  schemaVersion: 1,
  id: 'ap_1',
  kind: 'start',
  runId: 'r-1207-abcd',
  runName: 'qwen-grpo',
  threadId: 'web:main:m1',
  requester: { id: 'alice', name: 'alice' },
  gpus: 2,
  maxHours: 3,
  costUsd: 12,
  scriptExcerpt: '',
  origin: 'agent',
  createdAt: now.toISOString(),
  expiresAt: new Date(now.getTime() + 3600_000).toISOString(),
};

function formFor(platform: string, script: string, user = 'bob', card: Approval = approval) {
  const store = {
    get: async () => card,
    getDecision: async () => undefined,
  } as unknown as ApprovalStore;
  const provider = createEditFormProvider({
    store,
    policy: { approvers: ['bob'], selfApproval: true, autoApproveUsd: 0 },
    now: () => now,
    readScript: async () => script,
  });
  return provider(
    { threadId: `${platform}:C1:T1`, messageId: 'm2', actionId: 'edit:ap_1', user: { id: user, name: user } },
    'ap_1',
  );
}

describe('the Edit form', () => {
  it('is pre-filled with the card’s values and the script where it fits', async () => {
    const form = await formFor('discord', 'print("hi")\n');
    expect(form?.title).toBe('Edit and approve');
    expect(form?.fields.map((field) => [field.id, field.initial, field.maxLength])).toEqual([
      ['gpus', '2', 4],
      ['hours', '3', 10],
      ['name', 'qwen-grpo', 60],
      ['script', 'print("hi")\n', 4000],
    ]);
    expect(form?.note).toBeUndefined();
  });

  it('leaves out a script longer than the platform takes and says so', async () => {
    const script = `${'x = 1\n'.repeat(600)}`; // 3,600 characters: over Slack's 3,000, under Discord's 4,000
    const slack = await formFor('slack', script);
    expect(slack?.title).toBe('Edit (numbers only)');
    expect(slack?.fields.map((field) => field.id)).toEqual(['gpus', 'hours', 'name']);
    expect(slack?.note).toContain('longer than a form here takes (3000)');
    expect((await formFor('discord', script))?.fields.map((field) => field.id)).toContain('script');
    expect((await formFor('discord', 'x = 1\n'.repeat(700)))?.note).toContain('(4000)');
  });

  it('never hands out a script holding a secret', async () => {
    const form = await formFor('web', 'token = "hf_abcdefghijklmnopqrstuvwxyz0123456789"\n');
    expect(form?.fields.map((field) => field.id)).toEqual(['gpus', 'hours', 'name']);
    expect(form?.note).toContain('holds a secret');
  });

  it('edits no GPUs on a script change, only the cron on a schedule card, and is no form for someone who may not approve', async () => {
    const change: Approval = { ...approval, kind: 'script-change', proposedScript: 'print(2)\n' };
    const form = await formFor('web', '', 'bob', change);
    expect(form?.fields.map((field) => [field.id, field.initial])).toEqual([
      ['hours', '3'],
      ['name', 'qwen-grpo'],
      ['script', 'print(2)\n'],
    ]);
    expect(await formFor('web', 'print(1)\n', 'carol')).toBeUndefined();
    const schedule = await formFor('web', '', 'bob', {
      ...approval,
      kind: 'schedule',
      schedule: '0 3 * * *',
    });
    expect(schedule?.fields.map((field) => [field.id, field.label, field.initial])).toEqual([
      ['schedule', 'Schedule (cron, UTC)', '0 3 * * *'],
    ]);
    const sweep = await formFor('web', '', 'bob', { ...approval, kind: 'sweep' });
    expect(sweep?.fields.map((field) => field.label)).toEqual([
      'GPUs per trial',
      'Max hours per trial',
      'Sweep name',
    ]);
  });

  it('renders as a Slack modal with the note on top and as a Discord modal within its limits', async () => {
    const slack = await formFor('slack', 'x = 1\n'.repeat(600));
    const view = formView(slack ?? { title: '', submitLabel: '', fields: [] }, {
      threadId: 'slack:C1:T1',
      messageId: '1.2',
      actionId: 'edit:ap_1',
    });
    expect(view.title.text).toBe('Edit (numbers only)');
    expect(view.blocks[0]).toEqual({
      type: 'context',
      elements: [{ type: 'plain_text', text: slack?.note }],
    });
    expect(view.blocks.slice(1).map((block) => ('block_id' in block ? block.block_id : ''))).toEqual([
      'gpus',
      'hours',
      'name',
    ]);
    const discord = await formFor('discord', 'print("hi")\n');
    const modal = modalOf(discord ?? { title: '', submitLabel: '', fields: [] }, 'edit:ap_1');
    expect(modal.components).toHaveLength(4);
    expect(JSON.stringify(modal.components)).toContain('"custom_id":"script"');
    expect(JSON.stringify(modal.components)).toContain('"max_length":4000');
  });
});
