import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { createRunAccess, RunAccessError } from '../../src/runs/operations/run-access.js';
import type { AttemptEntry, AuditLog } from '../../src/runs/records/audit-log.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/*
 * Issue 10 item 4: pause, resume, stop and script edits belong to the run's requester and the approvers
 * (or, without approvers, to the people in the run's thread). Others get a private refusal, through plain
 * commands, agent tools and card buttons alike, and every attempt lands in the audit log.
 */

const visibleTo = (message: PlaygroundMessage) =>
  (message as PlaygroundMessage & { visibleTo?: string }).visibleTo;

describe('who may change a run (playground, approvers set)', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let threadId: string;
  let runId: string;

  beforeAll(async () => {
    llm = await startScriptedOpenAi();
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_GPUS: '2',
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_APPROVERS: 'bob',
        SHEPHERD_STOP_GRACE_S: '3',
      },
      overrides: {
        runEnvironment: { ...process.env, HEALTHY_STEPS: '100000', HEALTHY_SLEEP: '0.05' },
      },
    });
    threadId = await shepherd.mention('run test/fixtures/healthy_train.py --gpus 1 --name guarded', 'alice');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'guarded').length > 0,
    );
    const card = cardsTitled(messages, 'guarded')[0];
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);
    const deadline = Date.now() + 20_000;
    while ((await shepherd.app.features.runs.find('guarded')).status !== 'running') {
      if (Date.now() > deadline) throw new Error('the run never started');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    runId = (await shepherd.app.features.runs.find('guarded')).id;
  }, 60_000);

  afterAll(async () => {
    const run = await shepherd.app.features.runs.find('guarded').catch(() => undefined);
    if (run?.status === 'running' || run?.status === 'queued')
      await shepherd.app.features.runs.service.stop(run.id, 'system').catch(() => undefined);
    await shepherd.stop();
    await llm.close();
  });

  const status = async () => (await shepherd.app.features.runs.find(runId)).status;
  const attempts = async (): Promise<AttemptEntry[]> =>
    (await shepherd.app.features.runs.audit.recentAttempts(100)).filter((entry) => entry.runId === runId);

  it('refuses a plain command from someone else, privately, and audits it', async () => {
    for (const [command, action] of [
      ['stop guarded', 'stop'],
      ['pause guarded', 'pause'],
    ] as const) {
      await shepherd.reply(threadId, `@shepherd ${command}`, 'mallory');
      const messages = await shepherd.waitForMessages(threadId, (all) =>
        all.some(
          (message) => visibleTo(message) === 'mallory' && message.text.includes(`can ${action} guarded`),
        ),
      );
      const refusal = messages.filter((message) => visibleTo(message) === 'mallory').at(-1);
      expect(refusal?.text).toMatch(/Only alice \(who started guarded\) or an approver can/);
      // Nobody else is shown the refusal as a normal post.
      expect(
        botMessages(messages).some(
          (message) => visibleTo(message) === undefined && message.text.includes(`can ${action}`),
        ),
      ).toBe(false);
      expect(await status()).toBe('running');
      expect(await attempts()).toContainEqual(
        expect.objectContaining({
          action,
          via: 'command',
          allowed: false,
          by: { id: 'mallory', name: 'mallory' },
        }),
      );
    }
  });

  it('refuses the agent tools on behalf of someone else', async () => {
    llm.enqueue({
      toolCalls: [
        { name: 'stop_training', arguments: { run: 'guarded' } },
        {
          name: 'update_script',
          arguments: { run: 'guarded', script: 'print("mine now")\n', reason: 'take over' },
        },
        {
          name: 'edit_script',
          arguments: {
            run: 'guarded',
            edits: [{ old: 'import shepherd', new: 'import os' }],
            reason: 'mine',
          },
        },
      ],
    });
    llm.enqueue({ text: 'I could not change it either.' });
    await shepherd.reply(threadId, '@shepherd please halt guarded and then rewrite its script', 'mallory');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => message.text.includes('could not change it either')),
    );
    const toolResults = JSON.stringify(llm.requests.map((request) => request.body));
    expect(toolResults).toContain('or an approver can stop guarded');
    expect(toolResults).toContain('or an approver can change the script of guarded');
    expect(await status()).toBe('running');
    expect(cardsTitled(await shepherd.messages(threadId), 'Approve script change')).toHaveLength(0);
    const agentAttempts = (await attempts()).filter((entry) => entry.via === 'agent');
    // update_script and edit_script: two refused script changes.
    expect(agentAttempts.filter((entry) => entry.action === 'update_script' && !entry.allowed)).toHaveLength(
      2,
    );
    expect(agentAttempts.map((entry) => [entry.action, entry.allowed])).toEqual(
      expect.arrayContaining([
        ['stop', false],
        ['update_script', false],
      ]),
    );
  });

  it('refuses the alert card Stop and Fix buttons to someone else and lets an approver press them', async () => {
    const meta = await shepherd.app.features.runs.find(runId);
    await shepherd.app.features.alerts.onIncident(
      {
        id: `plateau-${runId}`,
        runId,
        kind: 'plateau',
        severity: 'warning',
        title: 'guarded: loss plateaued',
        summary: 'loss has not improved for 200 steps',
        metrics: ['loss'],
        at: Date.now(),
      },
      meta as RunMeta,
    );
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => message.card?.title === 'guarded: loss plateaued'),
    );
    const card = messages.find((message) => message.card?.title === 'guarded: loss plateaued');
    const stopButton = card?.card?.actions?.find((action) => action.actionId.startsWith('stop:'));
    const fixButton = card?.card?.actions?.find((action) => action.actionId.startsWith('fix:'));
    expect(stopButton && fixButton).toBeDefined();

    const refusedStop = await shepherd.click(threadId, card?.id ?? '', stopButton?.actionId ?? '', 'mallory');
    expect(refusedStop.status).toBe(403);
    expect(String(refusedStop.body.error)).toMatch(/or an approver can stop guarded/);
    const refusedFix = await shepherd.click(threadId, card?.id ?? '', fixButton?.actionId ?? '', 'mallory');
    expect(refusedFix.status).toBe(403);
    expect(await status()).toBe('running');

    // The refused clicks did not use the card up: an approver's click still decides it.
    const stopped = await shepherd.click(threadId, card?.id ?? '', stopButton?.actionId ?? '', 'bob');
    expect(stopped.status).toBe(200);
    await expect.poll(status, { timeout: 30_000 }).toBe('stopped');
    const buttonAttempts = (await attempts()).filter((entry) => entry.via === 'button');
    expect(buttonAttempts.map((entry) => [entry.action, entry.by.id, entry.allowed])).toEqual([
      ['stop', 'mallory', false],
      ['fix', 'mallory', false],
      ['stop', 'bob', true],
    ]);
  }, 60_000);
});

describe('the access rule', () => {
  const recorded: AttemptEntry[] = [];
  const audit = {
    recordAttempt: async (entry: AttemptEntry) => {
      recorded.push(entry);
    },
  } as unknown as AuditLog;
  const meta = {
    id: 'r-1',
    name: 'demo',
    threadId: 'slack:C1:100.1',
    requester: { id: 'UALICE', name: 'alice' },
  } as RunMeta;
  const check = (approvers: string[], user: string, threadId: string) =>
    createRunAccess({ approvers, audit, logger: createLogger('silent') })
      .authorize(meta, { id: user, name: user }, threadId, 'stop', 'command')
      .then(
        () => 'allowed',
        (error: unknown) => (error instanceof RunAccessError ? 'refused' : String(error)),
      );

  it('without approvers: the requester anywhere, others only in the run thread', async () => {
    expect(await check([], 'UALICE', 'slack:C2:200.1')).toBe('allowed');
    expect(await check([], 'UCAROL', 'slack:C1:100.1')).toBe('allowed');
    expect(await check([], 'UCAROL', 'slack:C2:200.1')).toBe('refused');
    // The same id on another platform is somebody else.
    expect(await check([], 'UALICE', 'web:ml-runs:m9')).toBe('refused');
  });

  it('with approvers: the requester and approvers (by id, platform prefixes honoured), nobody else', async () => {
    expect(await check(['UBOB'], 'UCAROL', 'slack:C1:100.1')).toBe('refused');
    expect(await check(['UBOB'], 'UBOB', 'slack:C2:200.1')).toBe('allowed');
    expect(await check(['slack:UBOB'], 'UBOB', 'slack:C1:100.1')).toBe('allowed');
    expect(await check(['slack:UBOB'], 'UBOB', 'web:ml-runs:m1')).toBe('refused');
    expect(await check(['discord:UBOB'], 'UBOB', 'slack:C1:100.1')).toBe('refused');
    expect(recorded.filter((entry) => !entry.allowed)).toHaveLength(4 + 0 + 1);
    expect(recorded.every((entry) => entry.action === 'stop' && entry.via === 'command')).toBe(true);
  });
});
