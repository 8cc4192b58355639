import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled, metricSteps } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { untilEvery } from '../helpers/until.js';

const HEALTHY = 'test/fixtures/healthy_train.py';

const cardMessage = (messages: PlaygroundMessage[], titlePart: string) => cardsTitled(messages, titlePart)[0];

const until = untilEvery({ timeoutMs: 20_000, intervalMs: 100 });

describe('runs from a thread (playground, real processes, SHEPHERD_GPUS=4)', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;

  beforeAll(async () => {
    llm = await startScriptedOpenAi();
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_GPUS: '4',
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_SELF_APPROVAL: 'false',
        SHEPHERD_APPROVERS: 'bob,carol,dan',
        SHEPHERD_STOP_GRACE_S: '5',
      },
      overrides: {
        runEnvironment: {
          ...process.env,
          HEALTHY_STEPS: '400',
          HEALTHY_SLEEP: '0.05',
          HEALTHY_CHECKPOINT_EVERY: '5',
        },
      },
    });
  });
  afterAll(async () => {
    for (const run of await shepherd.app.features.runs.list()) {
      if (run.status === 'running' || run.status === 'queued') {
        await shepherd.app.features.runs.service.stop(run.id, 'system').catch(() => undefined);
      }
    }
    await shepherd.stop();
    await llm.close();
  });

  it('launches by command, refuses self-approval, starts on approval with the right GPUs, pauses, resumes, stops', async () => {
    const threadId = await shepherd.mention(`run ${HEALTHY} --gpus 2 --name healthy-a`, 'alice');
    let messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardMessage(all, 'healthy-a') !== undefined,
    );
    const card = cardMessage(messages, 'healthy-a');
    expect(card?.card?.fields).toEqual(
      expect.arrayContaining([
        { label: 'Requested by', value: 'alice' },
        { label: 'GPUs', value: '2' },
        { label: 'Est. cost', value: '$120' },
      ]),
    );
    expect(card?.card?.text).toContain('import shepherd');
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect(approve).toBeDefined();

    const self = await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'alice');
    expect(self.status).toBe(403);
    expect(String(self.body.error)).toMatch(/approvers|own job/);
    const outsider = await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'mallory');
    expect(outsider.status).toBe(403);

    const accepted = await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob');
    expect(accepted.status).toBe(200);
    messages = await shepherd.waitForMessages(threadId, (all) => {
      const resolved = cardMessage(all, 'healthy-a');
      return (
        resolved?.card?.resolved !== undefined &&
        botMessages(all).some((m) => /running on GPUs 0,1/.test(m.text))
      );
    });
    expect(cardMessage(messages, 'healthy-a')?.card?.resolved).toMatch(/^Approved by bob at \d\d:\d\d UTC$/);
    expect(cardMessage(messages, 'healthy-a')?.card?.actions).toBeUndefined();
    const again = await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'carol');
    expect(again.status).toBe(409);

    const run = await shepherd.app.features.runs.find('healthy-a');
    expect(run.gpuIndices).toEqual([0, 1]);
    await until(() => metricSteps(shepherd.dataDir, run.id).length >= 12 || undefined, 'metrics');
    const log = readFileSync(join(shepherd.dataDir, 'runs', run.id, 'output.log'), 'utf8');
    expect(log).toContain("CUDA_VISIBLE_DEVICES='0,1'");

    await shepherd.reply(threadId, '@shepherd status healthy-a', 'carol');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /last metrics \(step \d+\)/.test(m.text)),
    );

    await shepherd.reply(threadId, '@shepherd pause healthy-a', 'dan');
    messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /^Paused healthy-a/.test(m.text)),
    );
    const paused = await shepherd.app.features.runs.status('healthy-a');
    expect(paused.meta.status).toBe('paused');
    expect(paused.meta.gpuIndices).toEqual([]);
    const checkpoint = paused.resume?.step ?? 0;
    expect(checkpoint).toBeGreaterThan(0);
    const stepsBefore = metricSteps(shepherd.dataDir, run.id).length;

    // Resuming asks for GPUs again: a new approval card.
    await shepherd.reply(threadId, 'resume healthy-a', 'dan');
    messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardMessage(all, 'Approve resuming run: healthy-a') !== undefined,
    );
    const resumeCard = cardMessage(messages, 'Approve resuming run: healthy-a');
    const resumeApprove = resumeCard?.card?.actions?.find((action) => action.label === 'Approve');
    expect(
      (await shepherd.click(threadId, resumeCard?.id ?? '', resumeApprove?.actionId ?? '', 'bob')).status,
    ).toBe(200);
    await until(
      () => metricSteps(shepherd.dataDir, run.id).length > stepsBefore + 2 || undefined,
      'metrics after resume',
    );
    const steps = metricSteps(shepherd.dataDir, run.id);
    expect(steps[stepsBefore]).toBe(checkpoint + 1);

    await shepherd.reply(threadId, 'stop healthy-a', 'dan');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => m.text === 'Stopped healthy-a.'),
    );
    expect((await shepherd.app.features.runs.find('healthy-a')).status).toBe('stopped');
  });

  it('applies exactly one of 10 concurrent approvals, and one outcome when approve races reject', async () => {
    const threadId = await shepherd.mention(`run ${HEALTHY} --gpus 1 --name race-a`, 'alice');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardMessage(all, 'race-a') !== undefined,
    );
    const card = cardMessage(messages, 'race-a');
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve')?.actionId ?? '';
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, index) =>
        shepherd.click(threadId, card?.id ?? '', approve, index % 2 ? 'bob' : 'carol'),
      ),
    );
    expect(results.filter((result) => result.status === 200)).toHaveLength(1);
    expect(results.filter((result) => result.status === 409)).toHaveLength(9);
    const run = await until(async () => {
      const meta = await shepherd.app.features.runs.find('race-a');
      return meta.status === 'running' ? meta : undefined;
    }, 'race-a running');
    expect(run.launchCount).toBe(1);

    const second = await shepherd.mention(`run ${HEALTHY} --gpus 1 --name race-b`, 'alice');
    const secondMessages = await shepherd.waitForMessages(
      second,
      (all) => cardMessage(all, 'race-b') !== undefined,
    );
    const secondCard = cardMessage(secondMessages, 'race-b');
    const actions = secondCard?.card?.actions ?? [];
    const [approveResult, rejectResult] = await Promise.all([
      shepherd.click(second, secondCard?.id ?? '', actions[0]?.actionId ?? '', 'bob'),
      shepherd.click(second, secondCard?.id ?? '', actions[1]?.actionId ?? '', 'carol'),
    ]);
    expect([approveResult.status, rejectResult.status].sort()).toEqual([200, 409]);
    const final = await shepherd.waitForMessages(
      second,
      (all) => cardMessage(all, 'race-b')?.card?.resolved !== undefined,
    );
    const resolved = cardMessage(final, 'race-b')?.card?.resolved ?? '';
    const status = (await shepherd.app.features.runs.find('race-b')).status;
    if (approveResult.status === 200) {
      expect(resolved).toMatch(/^Approved by bob/);
      expect(['queued', 'running']).toContain(status);
    } else {
      expect(resolved).toMatch(/^Rejected by carol/);
      expect(status).toBe('rejected');
    }
    await shepherd.app.features.runs.service.stop('race-a', 'system');
    if (status !== 'rejected') await shepherd.app.features.runs.service.stop('race-b', 'system');
  });

  it('refuses more GPUs than exist and scripts outside the workspace', async () => {
    const threadId = await shepherd.mention(`run ${HEALTHY} --gpus 8`, 'alice');
    await shepherd.waitForMessages(threadId, (all) => botMessages(all).some((m) => /8 GPUs.*4/.test(m.text)));
    await shepherd.reply(threadId, '@shepherd run ../../etc/evil.py', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => /outside the workspace/.test(m.text)),
    );
    await shepherd.reply(threadId, '@shepherd run /etc/passwd.py', 'alice');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).filter((m) => /outside the workspace/.test(m.text)).length === 2,
    );
    expect(messages.some((m) => m.card !== undefined)).toBe(false);
  });

  it('lets the agent launch a run and tells it the decision in a later turn', async () => {
    const script = readFileSync(HEALTHY, 'utf8');
    llm.enqueue(
      {
        toolCalls: [
          { name: 'start_training', arguments: { name: 'agent-run', script, gpus: 1, max_hours: 2 } },
        ],
      },
      { text: 'I asked the team to approve agent-run.' },
    );
    const threadId = await shepherd.mention('train the healthy fixture on one GPU', 'alice');
    let messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardMessage(all, 'agent-run') !== undefined,
    );
    const card = cardMessage(messages, 'agent-run');
    expect(card?.card?.fields).toEqual(expect.arrayContaining([{ label: 'Est. cost', value: '$5' }]));
    llm.enqueue({ text: 'Great, agent-run is running now.' });
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve')?.actionId ?? '';
    expect((await shepherd.click(threadId, card?.id ?? '', approve, 'carol')).status).toBe(200);
    messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => m.text.includes('agent-run is running now')),
    );
    const last = JSON.stringify(llm.requests.at(-1)?.body);
    expect(last).toMatch(/approved by carol; run agent-run started/);
    await shepherd.app.features.runs.service.stop('agent-run', 'system');
  });

  it('proposes a script change with a diff, archives train_v1.py on approval, and answers malformed arguments', async () => {
    const threadId = await shepherd.mention(`run ${HEALTHY} --gpus 0 --name change-a`, 'alice');
    let messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardMessage(all, 'change-a') !== undefined,
    );
    const card = cardMessage(messages, 'change-a');
    await shepherd.click(threadId, card?.id ?? '', card?.card?.actions?.[0]?.actionId ?? '', 'bob');
    const run = await until(async () => {
      const meta = await shepherd.app.features.runs.find('change-a');
      return meta.status === 'running' ? meta : undefined;
    }, 'change-a running');

    const updated = readFileSync(HEALTHY, 'utf8').replace('lr=1e-3', 'lr=5e-4');
    llm.enqueue(
      { toolCalls: [{ name: 'update_script', arguments: '{"run": "change-a", "script": ' }] },
      {
        toolCalls: [
          {
            name: 'update_script',
            arguments: { run: 'change-a', script: updated, reason: 'halve the learning rate' },
          },
        ],
      },
      { text: 'I proposed halving the learning rate.' },
    );
    await shepherd.reply(threadId, '@shepherd halve the learning rate', 'alice');
    messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardMessage(all, 'Approve script change: change-a') !== undefined,
    );
    const change = cardMessage(messages, 'Approve script change: change-a');
    expect(change?.card?.text).toContain(
      '-    shepherd.log_metrics(step=step, loss=2.0 * math.exp(-step / 20) + 0.1, lr=1e-3)',
    );
    expect(change?.card?.text).toContain(
      '+    shepherd.log_metrics(step=step, loss=2.0 * math.exp(-step / 20) + 0.1, lr=5e-4)',
    );
    // The turn's last answer comes after the card: wait for it before reading the requests.
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => m.text.includes('I proposed halving the learning rate.')),
    );
    expect(JSON.stringify(llm.requests.at(-2)?.body)).toMatch(/not valid JSON/);

    await shepherd.click(threadId, change?.id ?? '', change?.card?.actions?.[0]?.actionId ?? '', 'bob');
    // The old script is archived, then the new one written: wait for both.
    const runDirectory = join(shepherd.dataDir, 'runs', run.id);
    await until(
      () =>
        (existsSync(join(runDirectory, 'train_v1.py')) && existsSync(join(runDirectory, 'train.py'))) ||
        undefined,
      'train_v1.py and the new train.py',
    );
    expect(readFileSync(join(runDirectory, 'train.py'), 'utf8')).toContain('lr=5e-4');
    const restarted = await until(async () => {
      const meta = await shepherd.app.features.runs.find('change-a');
      return meta.status === 'running' && meta.launchCount === 2 ? meta : undefined;
    }, 'restart with the new script');
    expect(restarted.scriptVersion).toBe(2);
    await shepherd.app.features.runs.service.stop('change-a', 'system');
  });
});

describe('approval expiry', () => {
  it('marks the card expired and the run rejected when nobody decides in time', async () => {
    const shepherd = await startTestApp({
      environment: {
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_APPROVAL_TTL_H: '0.0005',
        SHEPHERD_GPUS: '1',
      },
    });
    try {
      const threadId = await shepherd.mention(`run ${HEALTHY} --gpus 1 --name expiring`, 'alice');
      const messages = await shepherd.waitForMessages(
        threadId,
        (all) => /^Expired/.test(cardMessage(all, 'expiring')?.card?.resolved ?? ''),
        15_000,
      );
      expect(cardMessage(messages, 'expiring')?.card?.actions).toBeUndefined();
      expect((await shepherd.app.features.runs.find('expiring')).status).toBe('rejected');
      const card = cardMessage(messages, 'expiring');
      const late = await shepherd.click(threadId, card?.id ?? '', `approve:${'x'}`, 'bob');
      expect([404, 409]).toContain(late.status);
    } finally {
      await shepherd.stop();
    }
  });
});

describe('auto-approval', () => {
  it('starts cheap jobs at once and still posts the card, marked auto-approved; dearer ones wait', async () => {
    const shepherd = await startTestApp({
      environment: {
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_GPUS: '2',
        SHEPHERD_AUTO_APPROVE_USD: '5',
        SHEPHERD_STOP_GRACE_S: '3',
      },
      overrides: { runEnvironment: { ...process.env, HEALTHY_STEPS: '200', HEALTHY_SLEEP: '0.05' } },
    });
    try {
      const cheap = await shepherd.mention(`run ${HEALTHY} --gpus 1 --hours 2 --name cheap-run`, 'alice');
      const messages = await shepherd.waitForMessages(cheap, (all) =>
        botMessages(all).some((m) => /cheap-run is running on GPU 0/.test(m.text)),
      );
      const card = cardMessage(messages, 'cheap-run');
      expect(card?.card?.resolved).toMatch(/^Auto-approved at \d\d:\d\d UTC \(est\. \$5 ≤ \$5\)$/);
      expect(card?.card?.actions).toBeUndefined();

      const dear = await shepherd.mention(`run ${HEALTHY} --gpus 1 --hours 3 --name dear-run`, 'alice');
      const dearMessages = await shepherd.waitForMessages(
        dear,
        (all) => cardMessage(all, 'dear-run') !== undefined,
      );
      expect(cardMessage(dearMessages, 'dear-run')?.card?.actions?.map((action) => action.label)).toEqual([
        'Approve',
        'Reject',
        'Edit',
      ]);
      expect((await shepherd.app.features.runs.find('dear-run')).status).toBe('pending_approval');
    } finally {
      await shepherd.app.features.runs.service.stop('cheap-run', 'system').catch(() => undefined);
      await shepherd.stop();
    }
  });
});

describe('bot restart (local executor)', () => {
  it('re-attaches to a run that kept going while the bot was down, and reports its end', async () => {
    const environment = {
      SHEPHERD_WORKSPACE: process.cwd(),
      SHEPHERD_GPUS: '2',
      SHEPHERD_MONITOR_INTERVAL_S: '0.5',
    };
    const overrides = { runEnvironment: { ...process.env, HEALTHY_STEPS: '80', HEALTHY_SLEEP: '0.05' } };
    const first = await startTestApp({ environment, overrides, keepState: true });
    const { prefix, dataDir } = first;
    const threadId = await first.mention(`run ${HEALTHY} --gpus 1 --name survivor`, 'alice');
    const messages = await first.waitForMessages(
      threadId,
      (all) => cardMessage(all, 'survivor') !== undefined,
    );
    const card = cardMessage(messages, 'survivor');
    await first.click(threadId, card?.id ?? '', card?.card?.actions?.[0]?.actionId ?? '', 'bob');
    const running = await until(async () => {
      const meta = await first.app.features.runs.find('survivor');
      return meta.status === 'running' ? meta : undefined;
    }, 'survivor running');
    await first.stop();
    // The training process outlives the bot.
    expect(() => process.kill(running.pid ?? -1, 0)).not.toThrow();

    const second = await startTestApp({ environment, overrides, prefix, dataDir });
    try {
      const reattached = await second.app.features.runs.find('survivor');
      expect(reattached.status).toBe('running');
      expect(reattached.pid).toBe(running.pid);
      const done = await second.waitForMessages(
        threadId,
        // The finished card (monitor tick) and the status line (run refresh) race; wait for both.
        (all) =>
          botMessages(all).some((m) => /survivor completed at step 80/.test(m.text)) &&
          cardsTitled(all, 'survivor finished').length > 0,
        30_000,
      );
      expect(cardsTitled(done, 'survivor finished')).toHaveLength(1);
      expect((await second.app.features.runs.find('survivor')).launchCount).toBe(1);
    } finally {
      await second.stop();
    }
  });
});
