/**
 * Slack's App Home and `/shepherd help`, end to end: real Bolt over Socket Mode ↔ the wire-level Slack
 * emulator ↔ the real core (runs, run-access, workers on real Redis). The run is a real child process.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { untilEvery } from '../helpers/until.js';
import {
  appHomeOpenedEvent,
  eventCallback,
  homeBlockActionsPayload,
  messageEvent,
  type SlackEmulator,
  slashCommandPayload,
  startSlackEmulator,
} from '../slack/emulator/index.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const until = untilEvery({ timeoutMs: 20_000, intervalMs: 100 });

describe('Slack App Home and /shepherd help', () => {
  let slack: SlackEmulator;
  let shepherd: TestApp;
  let runId = '';

  beforeAll(async () => {
    slack = await startSlackEmulator({
      users: [
        { id: 'UALICE', name: 'alice', displayName: 'Alice' },
        { id: 'UBOB', name: 'bob', realName: 'Bob Builder' },
      ],
    });
    shepherd = await startTestApp({
      environment: {
        SLACK_BOT_TOKEN: slack.botToken,
        SLACK_APP_TOKEN: slack.appToken,
        SLACK_API_URL: slack.apiUrl,
        SHEPHERD_GPUS: '2',
        SHEPHERD_WORKSPACE: process.cwd(),
        // A CPU-only run costs nothing: approved at once, so the test sees it running.
        SHEPHERD_AUTO_APPROVE_USD: '100',
      },
    });
    await slack.waitForSocket();
  }, 60_000);

  afterAll(async () => {
    for (const run of (await shepherd?.app.features.runs.list()) ?? []) {
      if (run.status === 'running' || run.status === 'queued')
        await shepherd.app.features.runs.service.stop(run.id, 'system').catch(() => undefined);
    }
    await shepherd?.stop();
    await slack?.close();
  });

  const findRun = (name: string) => shepherd.app.features.runs.find(name);

  const publishesFor = (userId: string) =>
    slack.callsTo('views.publish').filter((call) => call.params.user_id === userId).length;

  /** Sends `deliver()` and resolves with the Home tab view published for `userId` in answer. */
  async function republished(userId: string, deliver: () => Promise<unknown>): Promise<string> {
    const before = publishesFor(userId);
    await deliver();
    await until(() => (publishesFor(userId) > before ? true : undefined), 'the published home tab');
    return JSON.stringify(slack.homeViews.get(userId)?.blocks ?? []);
  }

  const openHome = (userId: string) =>
    republished(userId, () => slack.sendEnvelope('events_api', eventCallback(appHomeOpenedEvent(userId))));
  const clickHome = (userId: string, actionId: string) =>
    republished(userId, () =>
      slack.sendEnvelope('interactive', homeBlockActionsPayload({ userId, actionId })),
    );

  it('publishes a Home tab listing the runs with status, GPUs, last loss and buttons', async () => {
    const empty = await openHome('UBOB');
    expect(empty).toContain('No runs yet.');

    const mention = messageEvent({
      type: 'app_mention',
      channel: 'C7',
      user: 'UALICE',
      text: '<@UBOT> run test/fixtures/slow_train.py --gpus 0 --name home-slow',
    });
    await slack.sendEnvelope('events_api', eventCallback(mention));
    const running = await until(async () => {
      const meta = await findRun('home-slow').catch(() => undefined);
      return meta?.status === 'running' ? meta : undefined;
    }, 'home-slow running');
    runId = running.id;

    // The run logs a loss every 0.1 s; open the tab until the last loss shows.
    const view = await until(async () => {
      const shown = await openHome('UALICE');
      return shown.includes('loss ') ? shown : undefined;
    }, 'a home tab with the loss');
    expect(view).toContain('*home-slow* · running · 0 GPUs · step ');
    expect(view).toMatch(/loss \d/);
    expect(view).toContain(`"action_id":"home:pause:${runId}"`);
    expect(view).toContain(`"action_id":"home:stop:${runId}"`);
    expect(view).not.toContain(`home:resume:${runId}`);
  }, 60_000);

  it('a button click acts under chat permissions: refused for someone else, done for the requester', async () => {
    expect(runId).not.toBe('');
    // Bob neither launched the run nor is an approver, and the Home tab is not the run's thread.
    const refused = await clickHome('UBOB', `home:stop:${runId}`);
    expect(refused).toContain('Only Alice (who started home-slow) or someone in its own thread can stop');
    await sleep(500);
    expect((await findRun('home-slow')).status).toBe('running');

    const paused = await clickHome('UALICE', `home:pause:${runId}`);
    expect(paused).toContain('Paused home-slow');
    expect((await findRun('home-slow')).status).toBe('paused');
    expect(paused).toContain('*home-slow* · paused');
    expect(paused).toContain(`home:resume:${runId}`);
  }, 60_000);

  it('`/shepherd help` (and a bare `/shepherd`) answers with the help', async () => {
    for (const text of ['help', '']) {
      const before = slack.messages.size;
      await slack.sendEnvelope(
        'slash_commands',
        slashCommandPayload({ userId: 'UALICE', channel: 'C7', text }),
      );
      const answer = await until(
        () =>
          [...slack.messages.values()]
            .slice(before)
            .find(
              (message) =>
                message.threadTs !== undefined && JSON.stringify(message).includes('Plain commands work'),
            ),
        `the help answer to "/shepherd ${text}"`,
      );
      // The plain `help` command's text (no LLM is configured here), answered in the command's thread.
      expect(JSON.stringify(answer)).toContain('`runs` (list runs)');
    }
  }, 60_000);
});
