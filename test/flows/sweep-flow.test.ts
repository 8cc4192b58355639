import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { expectEditedRun } from '../helpers/approval-edits.js';
import { cardsTitled, fetchesPng } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/**
 * Each trial checks that its values arrived both as `--key value` arguments and in `shepherd.config()`
 * (it exits 3 otherwise). lr above 1 diverges: the loss grows, then goes NaN, and the trial keeps running
 * (so only an early stop ends it).
 */
const TRAIN = `import argparse, math, sys, time, shepherd
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, required=True)
parser.add_argument("--bs", type=int, required=True)
args = parser.parse_args()
config = shepherd.config()
if config.get("lr") != args.lr or config.get("bs") != args.bs:
    print("values differ: args %r config %r" % (vars(args), config), flush=True)
    sys.exit(3)
shepherd.log("trial lr=%s bs=%s" % (args.lr, args.bs))
steps = 400 if args.lr > 1 else 40
for step in range(1, steps + 1):
    if args.lr > 1:
        loss = 2.0 * (1.6 ** step) if step < 15 else float("nan")
    else:
        loss = 2.0 / (1.0 + step * args.lr * args.bs / 16.0)
    shepherd.log_metrics(step=step, loss=loss)
    time.sleep(0.05)
shepherd.finish()
`;

const CRASHING_CANARY = `import time, shepherd
for step in range(1, 4):
    shepherd.log_metrics(step=step, loss=1.0 / step)
    time.sleep(0.05)
raise RuntimeError("boom: the data loader failed")
`;

/** Long enough to pause, resume and stop by hand. */
const SLOW = `import time, shepherd
for step in range(1, 2001):
    shepherd.log_metrics(step=step, loss=1.0 / step)
    time.sleep(0.05)
shepherd.finish()
`;

/** A command-form trial: its own --epochs plus the trial's --lr, in argv order. */
const COMMAND_TRAIN = `import sys, time, shepherd
argv = sys.argv[1:]
lr = float(argv[argv.index("--lr") + 1])
assert argv[:2] == ["--epochs", "2"], argv
assert shepherd.config()["lr"] == lr, shepherd.config()
for step in range(1, 11):
    shepherd.log_metrics(step=step, loss=1.0 / (1 + lr * step))
    time.sleep(0.05)
shepherd.finish()
`;

function readMeta(dataDir: string, runId: string): RunMeta {
  return JSON.parse(readFileSync(join(dataDir, 'runs', runId, 'meta.json'), 'utf8')) as RunMeta;
}

function runsNamed(dataDir: string, shepherd: TestApp, prefix: string): Promise<RunMeta[]> {
  return shepherd.app.features.runs
    .list()
    .then((all) =>
      all.filter((meta) => meta.name.startsWith(prefix)).map((meta) => readMeta(dataDir, meta.id)),
    );
}

/** Epoch seconds of a logged step (metrics.jsonl carries `ts`). */
function stepTime(dataDir: string, runId: string, step: number): number {
  const lines = readFileSync(join(dataDir, 'runs', runId, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean);
  const line = lines
    .map((text) => JSON.parse(text.replace(/NaN/g, 'null')) as { ts: number; step: number })
    .find((entry) => entry.step === step);
  if (line === undefined) throw new Error(`step ${step} not logged`);
  return line.ts;
}

describe('sweeps from a thread (playground, real processes, SHEPHERD_GPUS=4)', () => {
  let llm: ScriptedLlmServer;
  let workspace: string;
  let shepherd: TestApp;

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'no model in this test' } });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-sweep-'));
    writeFileSync(join(workspace, 'train.py'), TRAIN);
    writeFileSync(join(workspace, 'crashy.py'), CRASHING_CANARY);
    writeFileSync(join(workspace, 'slow.py'), SLOW);
    writeFileSync(join(workspace, 'cmd_train.py'), COMMAND_TRAIN);
    writeFileSync(join(workspace, 'broken.py'), 'import shepherd\nfor step in range(3)\n    print(step)\n');
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_GPUS: '4',
        SHEPHERD_APPROVERS: 'bob',
        SHEPHERD_MONITOR_INTERVAL_S: '0.25',
        SHEPHERD_STOP_GRACE_S: '2',
        SHEPHERD_GPU_HOUR_USD: '2.5',
      },
    });
  });
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  it('runs a 2×2 grid: one card with the total cost, the canary alone first, diverging trials stopped early, a leaderboard best-first and an overlay chart', async () => {
    const threadId = await shepherd.mention(
      'sweep train.py --grid lr=0.1,5 --grid bs=16,32 --gpus 1 --hours 1 --name grid --canary-steps 10',
      'alice',
    );
    const withCard = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Approve sweep').length === 1,
    );
    const card = cardsTitled(withCard, 'Approve sweep')[0]?.card;
    const field = (label: string) => card?.fields?.find((entry) => entry.label === label)?.value;
    expect(field('Trials')).toBe('4');
    expect(field('GPUs per trial')).toBe('1');
    expect(field('Max hours per trial')).toBe('1');
    expect(field('Est. total cost')).toBe('$10'); // 4 trials × 1 GPU × 1 h × $2.5
    for (const values of ['lr=0.1 bs=16', 'lr=0.1 bs=32', 'lr=5 bs=16', 'lr=5 bs=32'])
      expect(card?.text).toContain(values);
    // Nothing runs before approval.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    for (const meta of await runsNamed(shepherd.dataDir, shepherd, 'grid-')) {
      expect(meta.status).toBe('pending_approval');
      expect(meta.startedAt).toBeUndefined();
    }

    const message = cardsTitled(withCard, 'Approve sweep')[0];
    const approve = message?.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, message?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(
      200,
    );

    const hasChart = (m: { user: string; images?: string[] }) =>
      m.user === 'shepherd' && (m.images?.length ?? 0) > 0;
    const done = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.text.includes('🏁')) && all.some(hasChart),
      90_000,
    );
    const trials = new Map(
      (await runsNamed(shepherd.dataDir, shepherd, 'grid-')).map((meta) => [meta.name, meta]),
    );
    const canary = trials.get('grid-1') as RunMeta;
    // The canary ran alone until it had logged 10 healthy steps.
    const canaryHealthyAt = stepTime(shepherd.dataDir, canary.id, 10);
    for (const name of ['grid-2', 'grid-3', 'grid-4']) {
      const started = trials.get(name)?.startedAt;
      expect(started, name).toBeDefined();
      expect(Date.parse(started as string) / 1000, name).toBeGreaterThanOrEqual(canaryHealthyAt);
    }
    expect(canary.status).toBe('completed');
    expect(trials.get('grid-2')?.status).toBe('completed');
    // The diverging trials were stopped early (they would have run 400 steps).
    for (const name of ['grid-3', 'grid-4']) {
      const meta = trials.get(name) as RunMeta;
      expect(meta.status, name).toBe('stopped');
      expect(meta.statusReason, name).toMatch(/stopped early by sweep grid: (NaN|divergence)/);
      expect(meta.lastStep ?? 0, name).toBeLessThan(400);
    }
    // One alert line per bad trial, no card and no triage per trial.
    const texts = botMessages(done).map((m) => m.text);
    const earlyLines = texts.filter((text) => text.includes('stopped early —'));
    expect(earlyLines).toHaveLength(2);
    expect(texts.filter((text) => text.includes('crashed'))).toEqual([]);
    expect(earlyLines.some((text) => text.includes('grid-3 (lr=5 bs=16)'))).toBe(true);
    expect(earlyLines.some((text) => text.includes('grid-4 (lr=5 bs=32)'))).toBe(true);
    expect(botMessages(done).filter((m) => m.card !== undefined)).toHaveLength(1);
    expect(llm.requests.length).toBe(0);
    expect(texts.some((text) => text.includes('canary grid-1 logged'))).toBe(true);

    // Leaderboard: best first (bs=32 learns faster at the same lr), the diverged ones after.
    const board = texts.find((text) => text.includes('🏁')) as string;
    const order = ['grid-2', 'grid-1', 'grid-3', 'grid-4'].map((name) => board.indexOf(`${name} `));
    expect(order.every((position) => position > 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(board).toContain('Best: grid-2 (lr=0.1 bs=32)');
    expect(board).toMatch(/grid-3 .*stopped early: (NaN|divergence)/);
    const chart = done.find(hasChart);
    expect(chart?.text).toContain('the best, grid-2, is drawn thick');
    expect(await fetchesPng(shepherd.url, chart?.images?.[0])).toBe(true);

    // sweep-status shows the same table on demand.
    await shepherd.reply(threadId, '@shepherd sweep-status grid', 'carol');
    const status = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => m.text.startsWith('Sweep grid: completed')),
    );
    expect(botMessages(status).find((m) => m.text.startsWith('Sweep grid: completed'))?.text).toContain(
      'grid-2',
    );
  }, 150_000);

  it('Edit on the sweep card: approvers only, GPUs the host has, then every trial starts with the edited GPUs, hours and name', async () => {
    const threadId = await shepherd.mention(
      'sweep train.py --grid lr=0.1 --grid bs=16,32 --gpus 1 --hours 1 --name shaped --canary-steps 5',
      'alice',
    );
    const withCard = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Approve sweep').length === 1,
    );
    const message = cardsTitled(withCard, 'Approve sweep')[0];
    const edit = message?.card?.actions?.find((action) => action.label === 'Edit')?.actionId ?? '';
    expect(edit).toMatch(/^edit:ap_/);
    const click = (user: string, extra: Record<string, unknown>) =>
      shepherd.click(threadId, message?.id ?? '', edit, user, extra);

    const carol = await click('carol', { openForm: true });
    expect(carol.status).toBe(403);
    const opened = await click('bob', { openForm: true });
    expect(opened.status).toBe(200);
    const form = opened.body.form as { fields: Array<{ id: string; label: string; initial?: string }> };
    expect(form.fields.map((field) => [field.label, field.initial])).toEqual([
      ['GPUs per trial', '1'],
      ['Max hours per trial', '1'],
      ['Sweep name', 'shaped'],
    ]);
    const tooMany = await click('bob', { values: { gpus: '5', hours: '1', name: 'shaped' } });
    expect(tooMany.status).toBe(422);
    expect(String(tooMany.body.error)).toContain('this host has 4');
    const badName = await click('bob', { values: { gpus: '2', hours: '1', name: 'no spaces' } });
    expect(badName.status).toBe(422);
    expect(String(badName.body.error)).toContain('a sweep name is letters, digits and dashes');
    for (const meta of await runsNamed(shepherd.dataDir, shepherd, 'shaped-'))
      expect(meta.status).toBe('pending_approval');

    const submitted = await click('bob', { values: { gpus: '2', hours: '0.5', name: 'reshaped' } });
    expect(submitted.status).toBe(200);
    expect(submitted.body.message).toBe('approved with edits');
    // The canary holds the edited number of GPUs while it runs.
    const deadline = Date.now() + 20_000;
    let canary = (await runsNamed(shepherd.dataDir, shepherd, 'reshaped-1'))[0];
    while (canary?.status !== 'running' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      canary = (await runsNamed(shepherd.dataDir, shepherd, 'reshaped-1'))[0];
    }
    expect(canary?.gpuIndices).toHaveLength(2);
    const done = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.text.includes('🏁')),
      60_000,
    );
    const resolved = cardsTitled(done, 'Approve sweep')[0]?.card;
    expect(resolved?.resolved).toMatch(/^Approved by bob with edits at \d\d:\d\d UTC$/);
    expect(resolved?.text).toContain('GPUs: 1 → 2');
    expect(resolved?.text).toContain('max hours: 1 → 0.5');
    expect(resolved?.text).toContain('name: shaped → reshaped');
    for (const index of [1, 2])
      await expectEditedRun(shepherd, {
        name: `reshaped-${index}`,
        gpus: 2,
        maxHours: 0.5,
        before: { gpus: 1, maxHours: 1, name: `shaped-${index}` },
        by: 'bob',
      });
    for (const meta of await runsNamed(shepherd.dataDir, shepherd, 'reshaped-'))
      expect(meta.status, meta.name).toBe('completed');
    expect(botMessages(done).find((m) => m.text.includes('🏁'))?.text).toContain('reshaped-1');
  }, 90_000);

  it('stops the sweep when the canary crashes: the other trials never start and the thread says why', async () => {
    const threadId = await shepherd.mention(
      'sweep crashy.py --grid lr=1,2,3 --gpus 1 --hours 1 --name crashing',
      'alice',
    );
    const withCard = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Approve sweep').length === 1,
    );
    const message = cardsTitled(withCard, 'Approve sweep')[0];
    const approve = message?.card?.actions?.find((action) => action.label === 'Approve');
    await shepherd.click(threadId, message?.id ?? '', approve?.actionId ?? '', 'bob');
    const done = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.text.includes('🛑')),
      60_000,
    );
    const line = botMessages(done).find((m) => m.text.includes('🛑'))?.text;
    expect(line).toContain(
      'Sweep crashing stopped: the canary crashing-1 crashed (exit code 1) after step 3',
    );
    expect(line).toContain('the other 2 trials never start');
    await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.text.includes('🏁')),
      20_000,
    );
    const trials = await runsNamed(shepherd.dataDir, shepherd, 'crashing-');
    expect(trials.find((meta) => meta.name === 'crashing-1')?.status).toBe('failed');
    for (const meta of trials.filter((candidate) => candidate.name !== 'crashing-1')) {
      expect(meta.startedAt, meta.name).toBeUndefined();
      expect(meta.status, meta.name).toBe('stopped');
    }
    // No alert card and no triage for the trial's crash.
    expect(botMessages(done).filter((m) => m.card !== undefined)).toHaveLength(1);
  }, 90_000);
  it('pauses, resumes and stops a whole sweep by name and one trial by its own name, respecting --parallel', async () => {
    const threadId = await shepherd.mention(
      'sweep slow.py --grid lr=1,2,3 --gpus 1 --hours 1 --name ctl --canary-steps 5 --parallel 1',
      'alice',
    );
    const withCard = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Approve sweep').length === 1,
    );
    const message = cardsTitled(withCard, 'Approve sweep')[0];
    const approve = message?.card?.actions?.find((action) => action.label === 'Approve');
    await shepherd.click(threadId, message?.id ?? '', approve?.actionId ?? '', 'bob');
    await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.text.includes('canary ctl-1 logged')),
      30_000,
    );
    const status = async (name: string) => (await shepherd.app.features.runs.find(name)).status;
    // --parallel 1: the canary still holds the only slot.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await status('ctl-1')).toBe('running');
    expect(await status('ctl-2')).toBe('pending_approval');

    const said = async (text: string, expected: string) => {
      await shepherd.reply(threadId, `@shepherd ${text}`, 'alice');
      const all = await shepherd.waitForMessages(
        threadId,
        (messages) => botMessages(messages).some((m) => m.text.startsWith(expected)),
        30_000,
      );
      return botMessages(all).find((m) => m.text.startsWith(expected))?.text as string;
    };
    expect(await said('pause ctl', 'Paused sweep ctl')).toContain('1 running trial paused');
    expect(await status('ctl-1')).toBe('paused');
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await status('ctl-2')).toBe('pending_approval');
    expect(await said('sweep-status ctl', 'Sweep ctl: paused')).toContain('ctl-3');
    expect(await said('resume ctl', 'Resumed sweep ctl')).toContain('1 trial resumed');
    expect(await status('ctl-1')).toBe('running');

    // One trial by its own name: the next one takes its slot.
    await said('stop ctl-1', 'Stopped ctl-1');
    const deadline = Date.now() + 20_000;
    while ((await status('ctl-2')) !== 'running' && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await status('ctl-2')).toBe('running');
    expect(await status('ctl-3')).toBe('pending_approval');

    // Who may change a run decides for the sweep too: carol is neither the requester nor an approver.
    await shepherd.reply(threadId, '@shepherd stop ctl', 'carol');
    await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.text.startsWith('Only alice')),
      30_000,
    );
    expect(await status('ctl-2')).toBe('running');
    await said('stop ctl', 'Stopped sweep ctl');
    const done = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.text.includes('🏁 Sweep ctl: stopped')),
      30_000,
    );
    for (const name of ['ctl-1', 'ctl-2', 'ctl-3']) expect(await status(name), name).toBe('stopped');
    expect((await shepherd.app.features.runs.find('ctl-3')).startedAt).toBeUndefined();
    expect(botMessages(done).find((m) => m.text.includes('🏁'))?.text).toMatch(/ctl-3 .*not started/);
  }, 120_000);

  it('gives the agent start_sweep (one card for the grid) and compare_runs', async () => {
    llm.enqueue(
      {
        toolCalls: [
          {
            name: 'start_sweep',
            arguments: {
              script: 'train.py',
              grid: { lr: [0.1, 0.2], bs: [16] },
              gpus: 1,
              hours: 2,
              name: 'agent-grid',
              canary_steps: 5,
            },
          },
        ],
      },
      { text: 'I asked the team to approve the agent-grid sweep.' },
    );
    const threadId = await shepherd.mention('try lr 0.1 and 0.2 with bs 16 on train.py', 'alice');
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => m.text.includes('approve the agent-grid')),
    );
    const card = cardsTitled(messages, 'Approve sweep: agent-grid')[0]?.card;
    expect(card?.fields).toEqual(
      expect.arrayContaining([
        { label: 'Trials', value: '2' },
        { label: 'Est. total cost', value: '$10' },
      ]),
    );
    expect(card?.text).toContain('agent-grid-2: lr=0.2 bs=16');

    llm.enqueue(
      { toolCalls: [{ name: 'compare_runs', arguments: { runs: ['grid-1', 'grid-2'], metric: 'loss' } }] },
      { text: 'grid-2 is better.' },
    );
    const other = await shepherd.mention('which of grid-1 and grid-2 did better?', 'alice');
    const compared = await shepherd.waitForMessages(other, (all) =>
      botMessages(all).some((m) => m.text === 'grid-2 is better.'),
    );
    expect(compared.some((m) => (m.images?.length ?? 0) > 0)).toBe(true);
    expect(JSON.stringify(llm.requests.at(-1)?.body)).toContain('Best: grid-2');
  }, 60_000);
  it('sweeps a command (`sweep [options] -- <command…>`): each trial appends its --key value pairs', async () => {
    const threadId = await shepherd.mention(
      'sweep --grid lr=0.5,2 --gpus 1 --hours 1 --name cmd --canary-steps 3 -- python3 -u cmd_train.py --epochs 2',
      'alice',
    );
    const withCard = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Approve sweep').length === 1,
    );
    const message = cardsTitled(withCard, 'Approve sweep')[0];
    expect(message?.card?.text).toContain('Command: `python3 -u cmd_train.py --epochs 2 --key value…`');
    const approve = message?.card?.actions?.find((action) => action.label === 'Approve');
    await shepherd.click(threadId, message?.id ?? '', approve?.actionId ?? '', 'bob');
    const done = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => m.text.includes('🏁')),
      60_000,
    );
    const board = botMessages(done).find((m) => m.text.includes('🏁'))?.text as string;
    expect(board).toContain('Sweep cmd: completed');
    // Both trials completed, so each saw --epochs 2 followed by its own --lr, and the same lr in its config.
    for (const name of ['cmd-1', 'cmd-2']) {
      const meta = await shepherd.app.features.runs.find(name);
      expect(meta.status, name).toBe('completed');
      expect(meta.command).toEqual(['python3', '-u', 'cmd_train.py', '--epochs', '2']);
    }
    expect(board.indexOf('cmd-2 ')).toBeLessThan(board.indexOf('cmd-1 '));
  }, 90_000);
  it('compiles the script before the card: a syntax error gets no card and no trial', async () => {
    const threadId = await shepherd.mention('sweep broken.py --grid lr=1,2 --name broken-grid', 'alice');
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((m) => m.text.includes('No approval card')),
    );
    expect(botMessages(messages).find((m) => m.text.includes('No approval card'))?.text).toMatch(
      /broken\.py: .*line 2/s,
    );
    expect(messages.some((m) => m.card !== undefined)).toBe(false);
    const all = await shepherd.app.features.runs.list();
    expect(all.some((meta) => meta.name.startsWith('broken-grid'))).toBe(false);
  });
});
