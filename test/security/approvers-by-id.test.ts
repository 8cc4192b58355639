import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isListedUser } from '../../src/bot/approvers.js';
import { loadConfig } from '../../src/config/config.js';
import { type DiscordEmulator, startDiscordEmulator } from '../discord/emulator/discord-emulator.js';
import { makeUser } from '../discord/emulator/payloads.js';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { untilEvery } from '../helpers/until.js';
import {
  blockActionsPayload,
  eventCallback,
  messageEvent,
  type SlackEmulator,
  startSlackEmulator,
} from '../slack/emulator/index.js';

/*
 * Issue 10 item 3: SHEPHERD_APPROVERS matches stable ids only. On the old main a Slack user whose display
 * name was the approver's id approved a GPU job; the same trick works with a Discord nickname.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const until = untilEvery({ timeoutMs: 20_000, intervalMs: 100 });

describe('a spoofed display name cannot approve (real Bolt and discord.js against the emulators)', () => {
  let slack: SlackEmulator;
  let discord: DiscordEmulator;
  let shepherd: TestApp;
  // Mallory's every name on Slack is Bob's id; on Discord her nickname and global name are Bob's snowflake.
  const slackMallory = { id: 'UMALLORY', name: 'UBOB', displayName: 'UBOB', realName: 'UBOB' };
  let discordMallory: ReturnType<typeof makeUser>;

  beforeAll(async () => {
    slack = await startSlackEmulator({
      users: [
        { id: 'UALICE', name: 'alice', displayName: 'Alice' },
        { id: 'UBOB', name: 'bob', realName: 'Bob Builder' },
        slackMallory,
      ],
    });
    discord = await startDiscordEmulator();
    const bobId = discord.users.bob.id;
    discordMallory = makeUser(bobId, { globalName: bobId, nick: bobId });
    shepherd = await startTestApp({
      environment: {
        SLACK_BOT_TOKEN: slack.botToken,
        SLACK_APP_TOKEN: slack.appToken,
        SLACK_API_URL: slack.apiUrl,
        DISCORD_TOKEN: discord.token,
        DISCORD_API_URL: discord.apiUrl,
        SHEPHERD_GPUS: '2',
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_APPROVERS: `UBOB,${bobId}`,
      },
    });
    await slack.waitForSocket();
  }, 60_000);
  afterAll(async () => {
    for (const run of await shepherd.app.features.runs.list()) {
      if (run.status === 'running' || run.status === 'queued')
        await shepherd.app.features.runs.service.stop(run.id, 'system').catch(() => undefined);
    }
    await shepherd.stop();
    await slack.close();
    await discord.close();
  });

  const status = async (name: string) => (await shepherd.app.features.runs.find(name)).status;

  it('on Slack: refused privately, then the real approver approves', async () => {
    const mention = messageEvent({
      type: 'app_mention',
      channel: 'C7',
      user: 'UALICE',
      text: '<@UBOT> run test/fixtures/healthy_train.py --gpus 1 --name slack-spoof',
    });
    await slack.sendEnvelope('events_api', eventCallback(mention));
    const threadTs = String(mention.ts);
    const card = await until(
      () =>
        [...slack.messages.values()].find(
          (message) =>
            message.threadTs === threadTs &&
            JSON.stringify(message.blocks ?? []).includes('slack-spoof') &&
            JSON.stringify(message.blocks ?? []).includes('approve:'),
        ),
      'the approval card',
    );
    const approveId = /"action_id":"(approve:[^"]+)"/.exec(JSON.stringify(card.blocks))?.[1] ?? '';
    expect(approveId).toMatch(/^approve:ap_/);
    const click = (userId: string) =>
      slack.sendEnvelope(
        'interactive',
        blockActionsPayload({ userId, channel: 'C7', messageTs: card.ts, threadTs, actionId: approveId }),
      );

    await click('UMALLORY');
    const refusal = await slack.waitForCall(
      'chat.postEphemeral',
      (call) => call.params.user === 'UMALLORY',
      10_000,
    );
    expect(String(refusal.params.text)).toMatch(/only approvers/i);
    await sleep(1000);
    expect(await status('slack-spoof')).toBe('pending_approval');

    await click('UBOB');
    await slack.waitForCall(
      'chat.update',
      (call) => call.params.ts === card.ts && JSON.stringify(call.params.blocks).includes('Approved by'),
      15_000,
    );
    expect(await status('slack-spoof')).not.toBe('pending_approval');
  }, 60_000);

  it('on Discord: refused privately, then the real approver approves', async () => {
    const mention = discord.userSends({
      channelId: discord.channelId,
      author: discord.users.alice,
      content: 'run test/fixtures/healthy_train.py --gpus 1 --name discord-spoof',
      mentionBot: true,
    });
    const threadId = String(mention.id);
    const card = await discord.waitFor(
      () =>
        discord
          .messagesIn(threadId)
          .find(
            (message) =>
              JSON.stringify(message.embeds ?? []).includes('discord-spoof') &&
              JSON.stringify(message.components ?? []).includes('approve:'),
          ),
      20_000,
    );
    const approveId = /"custom_id":"(approve:[^"]+)"/.exec(JSON.stringify(card.components))?.[1] ?? '';
    expect(approveId).toMatch(/^approve:ap_/);

    const refused = discord.clickButton({
      messageId: String(card.id),
      customId: approveId,
      user: discordMallory,
    });
    await discord.waitFor(() => refused.callbacks[0], 10_000);
    const followUp = await discord.waitFor(
      () =>
        discord.calls.find(
          (call) =>
            call.method === 'POST' && call.path === `/webhooks/${discord.applicationId}/${refused.token}`,
        ),
      10_000,
    );
    expect(followUp.body).toMatchObject({ flags: 64 });
    expect(JSON.stringify(followUp.body)).toMatch(/only approvers/i);
    await sleep(1000);
    expect(await status('discord-spoof')).toBe('pending_approval');

    const approved = discord.clickButton({
      messageId: String(card.id),
      customId: approveId,
      user: discord.users.bob,
    });
    await discord.waitFor(() => approved.callbacks[0], 10_000);
    await discord.waitFor(
      () =>
        JSON.stringify(discord.message(String(card.id))?.embeds ?? []).includes('Approved by')
          ? true
          : undefined,
      15_000,
    );
    expect(await status('discord-spoof')).not.toBe('pending_approval');
  }, 60_000);
});

describe('approver entries', () => {
  it('match ids, honour platform prefixes, and never match names', () => {
    const bob = { id: 'U02BOB', name: 'bob' };
    expect(isListedUser(['U02BOB'], 'slack', bob)).toBe(true);
    expect(isListedUser(['slack:U02BOB'], 'slack', bob)).toBe(true);
    expect(isListedUser(['slack:U02BOB'], 'discord', bob)).toBe(false);
    expect(isListedUser(['slack:U02BOB'], 'web', bob)).toBe(false);
    expect(isListedUser(['bob'], 'slack', bob)).toBe(false);
    expect(isListedUser(['web:bob'], 'web', { id: 'bob', name: 'bob' })).toBe(true);
    expect(isListedUser(['discord:1234'], 'discord', { id: '1234', name: 'x' })).toBe(true);
    expect(
      loadConfig({ SHEPHERD_APPROVERS: 'slack:U02BOB, discord:1234, web:bob' }).approvals.approvers,
    ).toEqual(['slack:U02BOB', 'discord:1234', 'web:bob']);
    expect(() => loadConfig({ SHEPHERD_APPROVERS: 'teams:U1' })).toThrow(/slack:, discord: or web:/);
    expect(() => loadConfig({ SHEPHERD_APPROVERS: 'slack:' })).toThrow(/slack:, discord: or web:/);
  });
});
