/**
 * Issue 24, reject with a reason on Slack: real Bolt (Socket Mode) ↔ the wire-level Slack emulator ↔ the
 * real core. Reject opens a modal (`views.open` with the click's trigger id) for an approver; the
 * `view_submission` with the reason decides, and the card shows the reason. Someone whose click would not
 * count gets no modal, only the usual ephemeral refusal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
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

describe('reject with a reason on Slack (Bolt ↔ emulator)', () => {
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

  it('an approver’s Reject opens a modal; its reason decides the card and is shown on it', async () => {
    const mention = messageEvent({
      type: 'app_mention',
      channel: 'C9',
      user: 'UALICE',
      text: '<@UBOT> run test/fixtures/healthy_train.py --gpus 2 --name slack-reason',
    });
    await emulator.sendEnvelope('events_api', eventCallback(mention));
    const threadTs = String(mention.ts);
    const rejectId = await until(() => {
      for (const message of emulator.messages.values()) {
        if (message.threadTs !== threadTs) continue;
        const found = JSON.stringify(message.blocks ?? []).match(/"action_id":"(reject:ap_[^"]+)"/)?.[1];
        if (found !== undefined) return { ts: message.ts, actionId: found };
      }
      return undefined;
    }, 'the approval card');
    const click = (userId: string) =>
      emulator.sendEnvelope(
        'interactive',
        blockActionsPayload({
          userId,
          channel: 'C9',
          messageTs: rejectId.ts,
          threadTs,
          actionId: rejectId.actionId,
        }),
      );

    await click('UCAROL');
    const refusal = await emulator.waitForCall('chat.postEphemeral', (call) => call.params.user === 'UCAROL');
    expect(String(refusal.params.text)).toContain('only approvers');
    expect(emulator.openedViews).toHaveLength(0);

    await click('UBOB');
    const opened = await emulator.waitForCall('views.open');
    expect(opened.params.trigger_id).toMatch(/^trigger\./);
    const modal = emulator.openedViews.at(-1);
    expect(modal?.view).toMatchObject({
      type: 'modal',
      title: { type: 'plain_text', text: 'Reject' },
      blocks: [{ type: 'input', block_id: 'reason', optional: true, element: { type: 'plain_text_input' } }],
    });
    // The modal decided nothing yet.
    expect((await shepherd.app.features.runs.find('slack-reason')).status).toBe('pending_approval');

    await emulator.sendEnvelope(
      'interactive',
      viewSubmissionPayload({
        userId: 'UBOB',
        view: modal?.view ?? {},
        viewId: modal?.id ?? '',
        values: { reason: 'use 1 GPU and bf16' },
      }),
    );
    const update = await emulator.waitForCall(
      'chat.update',
      (call) => call.params.ts === rejectId.ts && JSON.stringify(call.params.blocks).includes('Rejected by'),
      15_000,
    );
    expect(JSON.stringify(update.params.blocks)).toMatch(
      /Rejected by Bob Builder at \d\d:\d\d UTC: use 1 GPU and bf16/,
    );
    expect((await shepherd.app.features.runs.find('slack-reason')).status).toBe('rejected');
  }, 60_000);
});
