/**
 * Issue 24, Edit on an approval card in Slack: real Bolt (Socket Mode) ↔ the wire-level Slack emulator ↔
 * the real core. An approver's Edit opens a modal (`views.open` with the click's trigger id) pre-filled
 * with GPUs, hours, name and script; a bad value is answered with an ephemeral message and decides
 * nothing; the edited submission approves, the run starts with the edits and the card shows them. Someone
 * who may not approve gets no modal, only Approve's refusal.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { expectEditedRun } from '../helpers/approval-edits.js';
import { until } from '../helpers/until.js';
import {
  blockActionsPayload,
  eventCallback,
  messageEvent,
  type SlackEmulator,
  startSlackEmulator,
  viewSubmissionPayload,
} from '../slack/emulator/index.js';

const USERS = [
  { id: 'UALICE', name: 'alice' },
  { id: 'UBOB', name: 'bob', realName: 'Bob Builder' },
  { id: 'UCAROL', name: 'carol' },
];

describe('edit then approve on Slack (Bolt ↔ emulator)', () => {
  let emulator: SlackEmulator;
  let shepherd: TestApp;

  beforeAll(async () => {
    emulator = await startSlackEmulator({ users: USERS });
    shepherd = await startTestApp({
      environment: {
        SLACK_BOT_TOKEN: emulator.botToken,
        SLACK_APP_TOKEN: emulator.appToken,
        SLACK_API_URL: emulator.apiUrl,
        SHEPHERD_LLM_BASE_URL: 'http://127.0.0.1:9/v1',
        SHEPHERD_GPUS: '2',
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_APPROVERS: 'UBOB',
      },
    });
    await emulator.waitForSocket();
  });
  afterAll(async () => {
    await shepherd?.stop();
    await emulator?.close();
  });

  it('an approver’s Edit opens a pre-filled modal; its submission approves with the edits', async () => {
    const mention = messageEvent({
      type: 'app_mention',
      channel: 'C9',
      user: 'UALICE',
      text: '<@UBOT> run test/fixtures/healthy_train.py --gpus 2 --name slack-edit',
    });
    await emulator.sendEnvelope('events_api', eventCallback(mention));
    const threadTs = String(mention.ts);
    const card = await until(() => {
      for (const message of emulator.messages.values()) {
        if (message.threadTs !== threadTs) continue;
        const found = JSON.stringify(message.blocks ?? []).match(/"action_id":"(edit:ap_[^"]+)"/)?.[1];
        if (found !== undefined) return { ts: message.ts, actionId: found };
      }
      return undefined;
    }, 'the approval card with Edit');
    const click = (userId: string) =>
      emulator.sendEnvelope(
        'interactive',
        blockActionsPayload({ userId, channel: 'C9', messageTs: card.ts, threadTs, actionId: card.actionId }),
      );

    await click('UCAROL');
    const refusal = await emulator.waitForCall('chat.postEphemeral', (call) => call.params.user === 'UCAROL');
    expect(String(refusal.params.text)).toContain('only approvers (UBOB) can approve');
    expect(emulator.openedViews).toHaveLength(0);

    const script = readFileSync('test/fixtures/healthy_train.py', 'utf8');
    await click('UBOB');
    const opened = await emulator.waitForCall('views.open');
    expect(opened.params.trigger_id).toMatch(/^trigger\./);
    const modal = emulator.openedViews.at(-1);
    const initial = (id: string) =>
      ((modal?.view.blocks ?? []) as Array<{ block_id?: string; element?: { initial_value?: string } }>).find(
        (block) => block.block_id === id,
      )?.element?.initial_value;
    expect(modal?.view).toMatchObject({ type: 'modal', submit: { text: 'Approve' } });
    expect([initial('gpus'), initial('hours'), initial('name'), initial('script')]).toEqual([
      '2',
      '24',
      'slack-edit',
      script,
    ]);
    const submit = (values: Record<string, string>) =>
      emulator.sendEnvelope(
        'interactive',
        viewSubmissionPayload({ userId: 'UBOB', view: modal?.view ?? {}, viewId: modal?.id ?? '', values }),
      );

    await submit({ gpus: '-1', hours: '2', name: 'slack-edit', script });
    const invalid = await emulator.waitForCall('chat.postEphemeral', (call) => call.params.user === 'UBOB');
    expect(String(invalid.params.text)).toContain('not applied: GPUs must be a whole number');
    expect((await shepherd.app.features.runs.find('slack-edit')).status).toBe('pending_approval');

    await submit({ gpus: '1', hours: '2', name: 'slack-small', script: `${script}# edited in slack\n` });
    const update = await emulator.waitForCall(
      'chat.update',
      (call) => call.params.ts === card.ts && JSON.stringify(call.params.blocks).includes('with edits'),
      15_000,
    );
    const blocks = JSON.stringify(update.params.blocks);
    expect(blocks).toMatch(/Approved by Bob Builder with edits at \d\d:\d\d UTC/);
    expect(blocks).toContain('GPUs: 2 → 1');
    expect(blocks).toContain('name: slack-edit → slack-small');
    expect(blocks).toContain('+# edited in slack');
    await expectEditedRun(shepherd, {
      name: 'slack-small',
      gpus: 1,
      maxHours: 2,
      before: { gpus: 2, maxHours: 24, name: 'slack-edit' },
      by: 'Bob Builder',
      scriptLine: '# edited in slack',
    });
  }, 60_000);
});
