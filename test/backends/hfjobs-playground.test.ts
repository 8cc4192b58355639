import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type HfJobsEmulator, startHfJobsEmulator } from '../emulators/hf-jobs-server.js';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { outputOf, steps, until } from './remote-flow.js';

/**
 * Scenario 12 on HF Jobs, end to end through the playground: `--on hf` names the backend and the flavour's
 * price on the card, the approved job is created with the right flavour, timeout and script, its log flows
 * into output.log and a NaN alert with a chart, `stop` cancels it, `watch hf:<id>` follows a job started
 * elsewhere, and a bot restart in the middle re-attaches without writing a line twice.
 */

const SCRIPT = 'test/fixtures/remote_train.py';

describe('HF Jobs through the playground (emulated Jobs API, real job processes)', () => {
  let emulator: HfJobsEmulator;
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  const prefix = uniquePrefix('hf-flow');
  const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-hf-flow-'));
  const environment = () => ({
    SHEPHERD_BACKENDS: 'local,hf',
    SHEPHERD_HUB_URL: emulator.url,
    SHEPHERD_HUB_TOKEN: emulator.token,
    SHEPHERD_HF_NAMESPACE: emulator.namespace,
    SHEPHERD_HF_IMAGE: 'python:3.12-slim',
    SHEPHERD_LLM_BASE_URL: llm.url,
    SHEPHERD_WORKSPACE: process.cwd(),
    SHEPHERD_GPUS: '0',
    SHEPHERD_APPROVERS: 'bob',
    SHEPHERD_SELF_APPROVAL: 'false',
    SHEPHERD_MONITOR_INTERVAL_S: '0.5',
    SHEPHERD_STOP_GRACE_S: '3',
  });

  beforeAll(async () => {
    emulator = await startHfJobsEmulator({ schedulingMs: 300 });
    llm = await startScriptedOpenAi({ fallback: { text: 'Looking at it.' } });
    shepherd = await startTestApp({
      environment: environment(),
      prefix,
      dataDir,
      keepState: true,
      overrides: {
        runEnvironment: { ...process.env, SHEPHERD_RUN_ENV_WANDB_API_KEY: 'wandb-secret-123456' },
      },
    });
  });
  afterAll(async () => {
    await shepherd?.stop();
    await emulator?.close();
    await llm?.close();
    await deleteKeysWithPrefix(prefix);
  });

  it('refuses an unconfigured backend before any card, naming the configured ones', async () => {
    const threadId = await shepherd.mention(`run ${SCRIPT} --on k8s --gpus 1`, 'alice');
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /not configured/.test(m.text)),
    );
    const refusal = botMessages(messages).find((m) => /not configured/.test(m.text));
    expect(refusal?.text).toContain('the k8s backend is not configured here; configured: local, hf');
    expect(cardsTitled(messages, 'Approve')).toEqual([]);
  });

  it('launches on HF Jobs with a card naming the flavour and its price, alerts on NaN with a chart, stops by cancelling', async () => {
    const threadId = await shepherd.mention(
      `run ${SCRIPT} --on hf --gpus 1 --hours 2 --name hf-nan`,
      'alice',
    );
    let messages = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'hf-nan').length > 0);
    const card = cardsTitled(messages, 'hf-nan')[0] as PlaygroundMessage;
    const runsOn = card.card?.fields?.find((field) => field.label === 'Runs on')?.value ?? '';
    expect(runsOn).toMatch(/^HF Jobs a10g-small \(\$\d+\.\d\d\/h\)/);
    const hourly = Number(/\$(\d+\.\d\d)\/h/.exec(runsOn)?.[1]);
    // The estimate is the flavour's hourly price × the approved hours, not GPUs × SHEPHERD_GPU_HOUR_USD.
    const cost = card.card?.fields?.find((field) => field.label === 'Est. cost')?.value ?? '';
    expect(Number(cost.replace('$', ''))).toBeCloseTo(hourly * 2, 2);
    const approve = card.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card.id, approve?.actionId ?? '', 'bob')).status).toBe(200);

    const job = await until(() => emulator.allJobs()[0], 'the job to be created');
    expect(job.flavor).toBe('a10g-small');
    expect(job.timeoutSeconds).toBe(2 * 3600);
    expect(job.dockerImage).toBe('python:3.12-slim');
    // A `SHEPHERD_RUN_ENV_*` value travels as an encrypted job secret; the bot's own hub token never does.
    const sent = emulator.requests.find(
      (request) => request.method === 'POST' && request.path.endsWith(`/api/jobs/${emulator.namespace}`),
    );
    expect(sent?.body).toMatchObject({ secrets: { WANDB_API_KEY: 'wandb-secret-123456' } });
    expect(JSON.stringify(sent?.body)).not.toContain(emulator.token);
    // The job exists before Shepherd records its id: the "is running" line comes after.
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /^hf-nan is running/.test(m.text)),
    );
    const run = await shepherd.app.features.runs.find('hf-nan');
    expect(run.executor).toBe('hfjobs');
    expect(run.jobId).toBe(job.id);

    await until(() => steps(outputOf(dataDir, run.id)).length >= 5 || undefined, 'log lines in output.log');
    messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'hf-nan: non-finite metric').length > 0,
      60_000,
    );
    const alert = cardsTitled(messages, 'hf-nan: non-finite metric')[0];
    expect(alert?.card?.imageUrl ?? alert?.images?.[0]).toBeDefined();

    await shepherd.reply(threadId, 'status hf-nan', 'carol');
    messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /runs on: HF Jobs a10g-small/.test(m.text)),
    );
    await shepherd.reply(threadId, 'runs', 'carol');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /\[hf\] hf-nan \(/.test(m.text)),
    );

    await shepherd.reply(threadId, 'stop hf-nan', 'alice');
    await until(
      () => emulator.job(job.id)?.status.stage === 'CANCELED' || undefined,
      'the job to be cancelled',
    );
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /^Stopped hf-nan/.test(m.text)),
    );
    const after = await shepherd.app.features.runs.find('hf-nan');
    expect(after.status).toBe('stopped');
    expect(after.stopRequested).toBeUndefined();
    // The cancel Shepherd asked for is not reported as a crash (nor triaged).
    const afterStop = botMessages(await shepherd.messages(threadId));
    expect(
      afterStop.some((m) => /hf-nan failed/.test(m.text) || /Triage of hf-nan \(crash\)/.test(m.text)),
    ).toBe(false);
    expect(emulator.pidOf(job.id)).toBeUndefined();
    // Every printed step is in output.log exactly once.
    const written = steps(outputOf(dataDir, run.id));
    expect(new Set(written).size).toBe(written.length);

    // A recurring job of the same run: refused when malformed, created only once an approver approves.
    await shepherd.reply(threadId, 'schedule hf-nan --cron "every night"', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /every night/.test(m.text) && m.user === 'shepherd'),
    );
    expect(emulator.scheduled.size).toBe(0);
    await shepherd.reply(threadId, 'schedule hf-nan --cron "0 3 * * *"', 'alice');
    messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Approve recurring job: hf-nan').length > 0,
    );
    const scheduleCard = cardsTitled(messages, 'Approve recurring job: hf-nan')[0] as PlaygroundMessage;
    expect(scheduleCard.card?.fields).toEqual(
      expect.arrayContaining([{ label: 'Schedule (cron, UTC)', value: '0 3 * * *' }]),
    );
    expect(emulator.scheduled.size).toBe(0);
    // Edit: approvers only, the cron checked as `schedule` checks it, then approved with the edited cron.
    const edit = scheduleCard.card?.actions?.find((action) => action.label === 'Edit')?.actionId ?? '';
    expect(edit).toMatch(/^edit:ap_/);
    const click = (user: string, extra: Record<string, unknown>) =>
      shepherd.click(threadId, scheduleCard.id, edit, user, extra);
    expect((await click('carol', { openForm: true })).status).toBe(403);
    expect((await click('carol', { values: { schedule: '30 4 * * *' } })).status).toBe(403);
    const opened = await click('bob', { openForm: true });
    expect(opened.status).toBe(200);
    const form = opened.body.form as { fields: Array<{ id: string; label: string; initial?: string }> };
    expect(form.fields.map((field) => [field.id, field.label, field.initial])).toEqual([
      ['schedule', 'Schedule (cron, UTC)', '0 3 * * *'],
    ]);
    const badCron = await click('bob', { values: { schedule: 'every morning' } });
    expect(badCron.status).toBe(422);
    expect(String(badCron.body.error)).toContain('"every morning" is not a schedule: give five cron fields');
    expect(emulator.scheduled.size).toBe(0);
    const submitted = await click('bob', { values: { schedule: ' 30 4 * * * ' } });
    expect(submitted.status).toBe(200);
    expect(submitted.body.message).toBe('approved with edits');
    await until(() => emulator.scheduled.size === 1 || undefined, 'the scheduled job');
    const [schedule] = [...emulator.scheduled.values()];
    expect(JSON.stringify(schedule)).toContain('30 4 * * *');
    expect(JSON.stringify(schedule)).not.toContain('0 3 * * *');
    messages = await shepherd.waitForMessages(threadId, (all) =>
      /^Approved by bob with edits/.test(
        cardsTitled(all, 'Approve recurring job: hf-nan')[0]?.card?.resolved ?? '',
      ),
    );
    const resolved = cardsTitled(messages, 'Approve recurring job: hf-nan')[0]?.card;
    expect(resolved?.text).toContain('schedule: 0 3 * * * → 30 4 * * *');
    const approvalId = edit.slice('edit:'.length);
    const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    const recorded = JSON.parse((await redis.get(`${prefix}:approval-decision:${approvalId}`)) ?? '{}');
    redis.disconnect();
    expect(recorded).toMatchObject({
      decision: 'approved',
      user: { name: 'bob' },
      edits: { before: { schedule: '0 3 * * *' }, after: { schedule: '30 4 * * *' } },
    });
    await shepherd.reply(threadId, 'runs', 'carol');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /Scheduled on HF Jobs:\n• hf-nan: "30 4 \* \* \*"/.test(m.text)),
    );
  });

  it('refuses a recurring job for a run that is not on HF Jobs', async () => {
    const threadId = await shepherd.mention(`run ${SCRIPT} --gpus 0 --name local-one`, 'alice');
    await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'local-one').length > 0);
    await shepherd.reply(threadId, 'schedule local-one --cron "@daily"', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) =>
        /local-one runs on local; recurring jobs repeat a run Shepherd launched on HF Jobs/.test(m.text),
      ),
    );
    expect(cardsTitled(await shepherd.messages(threadId), 'Approve recurring job')).toEqual([]);
  });

  it('watches a job started elsewhere and re-attaches after a bot restart without duplicating lines', async () => {
    // A teammate's job, created straight through the Jobs API (as `hf jobs run` would).
    const created = await fetch(`${emulator.url}/api/jobs/${emulator.namespace}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${emulator.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        flavor: 'cpu-basic',
        environment: {},
        dockerImage: 'python:3.12-slim',
        command: ['python3', '-u', '-c', readFileSync(SCRIPT, 'utf8')],
        timeoutSeconds: 600,
      }),
    });
    expect(created.status).toBe(200);
    const foreign = (await created.json()) as { id: string };

    const threadId = await shepherd.mention(`watch hf:${foreign.id} --name teammate-job`, 'frank');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /Watching HF job/.test(m.text)),
    );
    const run = await shepherd.app.features.runs.find('teammate-job');
    expect(run.watch).toEqual({ source: 'hfjobs', jobId: foreign.id });
    await until(() => steps(outputOf(dataDir, run.id)).length >= 5 || undefined, 'the foreign job’s log');

    // The bot restarts while the job runs; the new process picks the log up where it was.
    await shepherd.stop();
    const before = steps(outputOf(dataDir, run.id)).length;
    shepherd = await startTestApp({ environment: environment(), prefix, dataDir, keepState: true });
    await until(
      () => steps(outputOf(dataDir, run.id)).length > before + 10 || undefined,
      'new lines after the restart',
    );
    const written = steps(outputOf(dataDir, run.id));
    expect(new Set(written).size).toBe(written.length);
    expect(written).toEqual(written.map((_, index) => index + 1));
    // Its NaN reaches the thread like a launched run's.
    await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'teammate-job: non-finite metric').length > 0,
      60_000,
    );
    const watched = await shepherd.app.features.runs.find('teammate-job');
    expect(watched.status).toBe('running');
    await shepherd.app.features.runs.service.stop(watched.id, 'system');
    await until(() => emulator.job(foreign.id)?.status.stage === 'CANCELED' || undefined, 'the cancel');
  });
});
