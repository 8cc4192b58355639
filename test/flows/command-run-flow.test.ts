import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled, fetchesPng } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { untilEvery } from '../helpers/until.js';

/*
 * `run … -- <command>`, named environments and `watch <log> --pid N` through the playground, on the
 * local executor with real processes. Every process a test starts is ended by its pid.
 */

/** A small launcher like torchrun (Debian's torchrun is broken on Python 3.11): two ranks in the background. */
const LAUNCH_SH = `#!/bin/bash
export MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 WORLD_SIZE=2
for rank in 0 1; do
  RANK=$rank LOCAL_RANK=$rank python3 -u rank.py &
done
wait
`;

/** Rank 0 prints the losses (as real DDP scripts do); rank 1 only says it is alive. */
const RANK_PY = `import os, time
rank = int(os.environ["RANK"])
with open(os.path.join(os.environ["SHEPHERD_RUN_DIR"], "rank%d.pid" % rank), "w") as handle:
    handle.write(str(os.getpid()))
print("rank %d of %s, master %s:%s, cwd %s" % (rank, os.environ["WORLD_SIZE"], os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"], os.getcwd()), flush=True)
for step in range(1, 100000):
    if rank == 0:
        print("step=%d loss=%.4f" % (step, 2.0 / step), flush=True)
    elif step % 10 == 0:
        print("[rank 1] alive", flush=True)
    time.sleep(0.1)
`;

/** Prints which environment it runs in (each venv has its own `marker_env` module). */
const SHOW_ENV = `import sys, marker_env
print("MARKER=%s PREFIX=%s" % (marker_env.NAME, sys.prefix), flush=True)
`;

const CRASHING = `import sys
print("starting", flush=True)
raise SystemExit("broken: " + " ".join(sys.argv[1:]))
`;
const FIXED = `import sys
print("fixed version running with " + " ".join(sys.argv[1:]), flush=True)
`;

/** A job Shepherd did not start: logs a few steps, then crashes with a traceback. */
const HAND_STARTED_CRASH = `import sys, time
for step in range(1, 6):
    print("step=%d loss=%.3f" % (step, 1.0 / step), flush=True)
    time.sleep(0.3)
raise RuntimeError("hand-started job exploded")
`;
const HAND_STARTED_LONG = `import time
step = 0
while True:
    step += 1
    print("step=%d loss=%.3f" % (step, 1.0 / step), flush=True)
    time.sleep(0.2)
`;

const started: number[] = [];

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie (exited, not yet reaped by its parent) is dead for our purpose.
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

const until = untilEvery({ timeoutMs: 20_000, intervalMs: 100 });

function botSaid(messages: PlaygroundMessage[], pattern: RegExp): boolean {
  return botMessages(messages).some((message) => pattern.test(message.text));
}

async function approve(shepherd: TestApp, threadId: string, name: string): Promise<PlaygroundMessage> {
  const messages = await shepherd.waitForMessages(
    threadId,
    (all) => cardsTitled(all, `: ${name}`).length > 0,
  );
  const card = cardsTitled(messages, `: ${name}`)[0] as PlaygroundMessage;
  const button = card.card?.actions?.find((action) => action.label === 'Approve');
  const result = await shepherd.click(threadId, card.id, button?.actionId ?? '', 'alice');
  expect(result.status).toBe(200);
  return card;
}

function makeVenv(root: string, name: string): string {
  const venv = join(root, `venv-${name}`);
  execFileSync('python3', ['-m', 'venv', '--without-pip', venv]);
  const site = execFileSync(
    join(venv, 'bin', 'python'),
    ['-c', 'import site; print(site.getsitepackages()[0])'],
    {
      encoding: 'utf8',
    },
  ).trim();
  writeFileSync(join(site, 'marker_env.py'), `NAME = ${JSON.stringify(name)}\n`);
  return venv;
}

describe('run -- <command>, environments and watched logs (local executor)', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let workspace: string;
  let venvRoot: string;

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'ok' } });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-command-ws-'));
    venvRoot = mkdtempSync(join(tmpdir(), 'shepherd-venvs-'));
    writeFileSync(join(workspace, 'launch.sh'), LAUNCH_SH);
    writeFileSync(join(workspace, 'rank.py'), RANK_PY);
    writeFileSync(join(workspace, 'show_env.py'), SHOW_ENV);
    writeFileSync(join(workspace, 'train.py'), 'print("hi")\n');
    mkdirSync(join(workspace, 'jobs'));
    writeFileSync(join(workspace, 'jobs', 'train_cmd.py'), CRASHING);
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', ...args], {
        cwd: workspace,
      });
    git('init', '-q');
    git('add', '.');
    git('commit', '-q', '-m', 'initial');
    // Uncommitted work: the run must record the workspace as dirty.
    writeFileSync(join(workspace, 'notes.txt'), 'not committed\n');
    const envA = makeVenv(venvRoot, 'alpha');
    const envB = makeVenv(venvRoot, 'beta');
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_MONITOR_INTERVAL_S: '0.5',
        SHEPHERD_STOP_GRACE_S: '3',
        SHEPHERD_GPUS: '2',
        SHEPHERD_MAX_AUTOFIX: '0',
        SHEPHERD_ENVIRONMENTS: JSON.stringify({
          alpha: { venv: envA, env: { EXPERIMENT_TAG: 'from-alpha' } },
          beta: { venv: envB },
        }),
      },
    });
  });

  afterAll(async () => {
    for (const pid of started) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await shepherd?.stop();
    await llm?.close();
    rmSync(workspace, { recursive: true, force: true });
    rmSync(venvRoot, { recursive: true, force: true });
  });

  describe('two ranks started by `-- bash launch.sh`', () => {
    let threadId = '';
    let runId = '';
    const pids: number[] = [];

    it('shows the exact command on the card, runs both ranks in the workspace and records provenance', async () => {
      threadId = await shepherd.mention('run --name ddp -- bash launch.sh');
      const card = await approve(shepherd, threadId, 'ddp');
      expect(card.card?.text).toContain('Command:\n```\nbash launch.sh\n```');
      await shepherd.waitForMessages(threadId, (all) => botSaid(all, /ddp is running/));
      const meta = await shepherd.app.features.runs.find('ddp');
      runId = meta.id;
      const runDir = join(shepherd.dataDir, 'runs', runId);
      for (const rank of [0, 1]) {
        const file = join(runDir, `rank${rank}.pid`);
        const pid = await until(
          () => existsSync(file) && Number(readFileSync(file, 'utf8')),
          `rank ${rank} pid`,
        );
        started.push(pid);
        pids.push(pid);
      }
      expect(pids.every(alive)).toBe(true);
      const output = await until(() => {
        const text = readFileSync(join(runDir, 'output.log'), 'utf8');
        return /step=3 loss/.test(text) && text;
      }, 'rank 0 lines');
      expect(output).toContain(`rank 1 of 2, master 127.0.0.1:29555, cwd ${workspace}`);
      expect(output).toContain('rank 0 of 2');

      const provenance = JSON.parse(readFileSync(join(runDir, 'provenance.json'), 'utf8'));
      const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: workspace, encoding: 'utf8' }).trim();
      expect(provenance.command).toEqual(['bash', 'launch.sh']);
      expect(provenance.git).toEqual({ commit: head, dirty: true });
      expect(provenance.files).toEqual([{ path: 'launch.sh', copiedAs: 'provenance/launch.sh' }]);
      expect(readFileSync(join(runDir, 'provenance', 'launch.sh'), 'utf8')).toBe(LAUNCH_SH);
      expect((await shepherd.app.features.runs.store.readMeta(runId)).command).toEqual(['bash', 'launch.sh']);
    });

    // Needs metrics parsed from printed output (issue 11 section 1, branch h11a).
    it('draws a chart from rank 0’s printed lines', async () => {
      await until(() => {
        const text = readFileSync(join(shepherd.dataDir, 'runs', runId, 'output.log'), 'utf8');
        return /step=8 loss/.test(text);
      }, 'eight steps');
      await shepherd.reply(threadId, '@shepherd chart ddp');
      const messages = await shepherd.waitForMessages(
        threadId,
        (all) => botMessages(all).some((message) => (message.images?.length ?? 0) > 0),
        20_000,
      );
      const chart = botMessages(messages).find((message) => (message.images?.length ?? 0) > 0);
      expect(await fetchesPng(shepherd.url, chart?.images?.[0])).toBe(true);
    });

    it('stop ends both ranks', async () => {
      await shepherd.reply(threadId, '@shepherd stop ddp');
      await shepherd.waitForMessages(threadId, (all) => botSaid(all, /^Stopped ddp\.$/), 30_000);
      await until(() => pids.every((pid) => !alive(pid)), 'both ranks to end', 10_000);
      expect((await shepherd.app.features.runs.find(runId)).status).toBe('stopped');
    });
  });

  it('pause ends both ranks too', async () => {
    const threadId = await shepherd.mention('run --name ddp-pause -- bash launch.sh');
    await approve(shepherd, threadId, 'ddp-pause');
    const meta = await shepherd.app.features.runs.find('ddp-pause');
    const runDir = join(shepherd.dataDir, 'runs', meta.id);
    const pids: number[] = [];
    for (const rank of [0, 1]) {
      const file = join(runDir, `rank${rank}.pid`);
      const pid = await until(
        () => existsSync(file) && Number(readFileSync(file, 'utf8')),
        `rank ${rank} pid`,
      );
      started.push(pid);
      pids.push(pid);
    }
    expect(pids.every(alive)).toBe(true);
    await shepherd.reply(threadId, '@shepherd pause ddp-pause');
    await shepherd.waitForMessages(threadId, (all) => botSaid(all, /^Paused ddp-pause/), 30_000);
    await until(() => pids.every((pid) => !alive(pid)), 'both ranks to end', 10_000);
    expect((await shepherd.app.features.runs.find('ddp-pause')).status).toBe('paused');
  });

  it('warns on the card when --nproc_per_node does not match the GPUs asked for', async () => {
    const threadId = await shepherd.mention(
      'run --gpus 2 --name tr -- torchrun --nproc_per_node 4 train.py --lr 3e-4',
    );
    const messages = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, ': tr').length > 0);
    const card = cardsTitled(messages, ': tr')[0];
    expect(card?.card?.text).toContain('torchrun --nproc_per_node 4 train.py --lr 3e-4');
    expect(card?.card?.text).toMatch(/--nproc_per_node 4 does not match the 2 GPUs asked for/);
    const reject = card?.card?.actions?.find((action) => action.label === 'Reject');
    await shepherd.click(threadId, card?.id ?? '', reject?.actionId ?? '', 'alice');
    const meta = await shepherd.app.features.runs.find('tr');
    expect(meta.scriptPath).toBe(join(workspace, 'train.py'));
  });

  it('runs in the named environment: two venvs, each with its own marker module', async () => {
    const first = await shepherd.mention('run --env alpha --name in-alpha -- python -u show_env.py');
    const card = await approve(shepherd, first, 'in-alpha');
    expect(card.card?.fields).toContainEqual({
      label: 'Environment',
      value: `alpha (venv ${join(venvRoot, 'venv-alpha')}; env EXPERIMENT_TAG)`,
    });
    // A plain script run picks an environment too.
    const second = await shepherd.mention('run show_env.py --env beta --name in-beta');
    await approve(shepherd, second, 'in-beta');
    const runs = shepherd.app.features.runs;
    const outputOf = async (name: string) => {
      const meta = await runs.find(name);
      // Under load the launcher may not have created output.log yet: keep waiting for it.
      const path = join(shepherd.dataDir, 'runs', meta.id, 'output.log');
      return existsSync(path) ? readFileSync(path, 'utf8') : '';
    };
    for (const [name, marker] of [
      ['in-alpha', 'alpha'],
      ['in-beta', 'beta'],
    ] as const) {
      const deadline = Date.now() + 20_000;
      let text = '';
      while (Date.now() < deadline && !/MARKER=/.test(text)) {
        text = await outputOf(name);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(text).toContain(`MARKER=${marker} PREFIX=${join(venvRoot, `venv-${marker}`)}`);
    }
  });

  it('start_training accepts command: string[] instead of script', async () => {
    llm.enqueue(
      {
        toolCalls: [
          {
            name: 'start_training',
            arguments: { name: 'agent-cmd', command: ['python', '-u', 'show_env.py'], gpus: 0, env: 'beta' },
          },
        ],
      },
      { text: 'I asked the team to approve agent-cmd.' },
    );
    const threadId = await shepherd.mention('please start show_env.py in the beta environment');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, ': agent-cmd').length > 0,
    );
    const card = cardsTitled(messages, ': agent-cmd')[0];
    expect(card?.card?.text).toContain('Command:\n```\npython -u show_env.py\n```');
    expect(card?.card?.fields).toContainEqual({
      label: 'Environment',
      value: `beta (venv ${join(venvRoot, 'venv-beta')})`,
    });
    const meta = await shepherd.app.features.runs.find('agent-cmd');
    expect(meta).toMatchObject({
      command: ['python', '-u', 'show_env.py'],
      environmentName: 'beta',
      cwd: workspace,
    });
    const reject = card?.card?.actions?.find((action) => action.label === 'Reject');
    llm.enqueue({ text: 'understood' });
    await shepherd.click(threadId, card?.id ?? '', reject?.actionId ?? '', 'alice');
  });

  it('refuses an unknown environment before any card, listing the known ones', async () => {
    const threadId = await shepherd.mention('run --env gamma --name nope -- python -u show_env.py');
    const messages = await shepherd.waitForMessages(threadId, (all) => botSaid(all, /unknown environment/));
    expect(botMessages(messages).map((message) => message.text)).toContain(
      'unknown environment "gamma"; known environments: alpha, beta',
    );
    expect(messages.some((message) => message.card !== undefined)).toBe(false);
    await expect(shepherd.app.features.runs.find('nope')).rejects.toThrow(/no run named/);
  });

  it('a fix of a command run edits the named .py in the workspace and archives the old one in the run directory', async () => {
    const threadId = await shepherd.mention('run --name cmdpy --cwd jobs -- python3 -u train_cmd.py --lr 3');
    await approve(shepherd, threadId, 'cmdpy');
    const runs = shepherd.app.features.runs;
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline && (await runs.find('cmdpy')).status !== 'failed') {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const failed = await runs.find('cmdpy');
    expect(failed.status).toBe('failed');
    const result = await shepherd.app.features.operations.updateScript(
      'cmdpy',
      FIXED,
      'stop crashing',
      { id: 'alice', name: 'alice' },
      failed.threadId,
      'command',
    );
    expect(result.diff).toContain('+print("fixed version running with "');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Approve script change').length > 0,
    );
    const card = cardsTitled(messages, 'Approve script change')[0];
    const button = card?.card?.actions?.find((action) => action.label === 'Approve');
    await shepherd.click(threadId, card?.id ?? '', button?.actionId ?? '', 'alice');
    const runDir = join(shepherd.dataDir, 'runs', failed.id);
    await until(
      () => /fixed version running with --lr 3/.test(readFileSync(join(runDir, 'output.log'), 'utf8')),
      'the fixed script to run from the workspace',
    );
    expect(readFileSync(join(workspace, 'jobs', 'train_cmd.py'), 'utf8')).toBe(FIXED);
    expect(readFileSync(join(runDir, 'train_v1.py'), 'utf8')).toBe(CRASHING);
  });

  it('watches a log file plus pid it did not start: crash alert with the traceback, listed as watched, no fix', async () => {
    const log = join(workspace, 'hand.log');
    writeFileSync(join(workspace, 'hand_crash.py'), HAND_STARTED_CRASH);
    // Started by hand, as `python hand_crash.py > hand.log 2>&1` would be.
    const runner = spawn('bash', ['-c', `exec python3 -u hand_crash.py > ${JSON.stringify(log)} 2>&1`], {
      cwd: workspace,
      stdio: 'ignore',
      detached: true,
    });
    const handPid = runner.pid as number;
    started.push(handPid);
    runner.unref();
    await until(() => existsSync(log), 'the hand-started log');
    const threadId = await shepherd.mention(`watch hand.log --pid ${handPid}`);
    await shepherd.waitForMessages(threadId, (all) => botSaid(all, /Watching hand\.log as hand/));
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'hand failed').length > 0,
      30_000,
    );
    const alert = cardsTitled(messages, 'hand failed')[0];
    expect(alert?.card?.text).toContain('RuntimeError: hand-started job exploded');
    expect(alert?.card?.text).toContain(
      'Watched run: Shepherd did not launch it, so it offers no fix or relaunch.',
    );
    expect(alert?.card?.actions?.map((action) => action.label)).not.toContain('Ask Shepherd to fix');
    const runs = shepherd.app.features.runs;
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && (await runs.find('hand')).status !== 'failed') {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect((await runs.find('hand')).status).toBe('failed');
    await shepherd.reply(threadId, '@shepherd runs');
    await shepherd.waitForMessages(threadId, (all) => botSaid(all, /hand \(r-[^)]+\): watched, failed/));
    await shepherd.reply(threadId, '@shepherd resume hand');
    await shepherd.waitForMessages(threadId, (all) =>
      botSaid(all, /watched run: Shepherd did not launch it/),
    );
  });

  it('stopping a watched pid asks for a confirmation button, then sends SIGTERM', async () => {
    writeFileSync(join(workspace, 'hand_long.py'), HAND_STARTED_LONG);
    const log = join(workspace, 'long.log');
    const runner = spawn('bash', ['-c', `exec python3 -u hand_long.py > ${JSON.stringify(log)} 2>&1`], {
      cwd: workspace,
      stdio: 'ignore',
      detached: true,
    });
    const pid = runner.pid as number;
    started.push(pid);
    runner.unref();
    await until(() => existsSync(log), 'the log');
    const threadId = await shepherd.mention(`watch long.log --pid ${pid} --name longjob`);
    await shepherd.waitForMessages(threadId, (all) => botSaid(all, /Watching long\.log as longjob/));
    await shepherd.reply(threadId, '@shepherd stop longjob');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'Stop watched run longjob?').length > 0,
    );
    // Nothing is signalled before the click.
    expect(alive(pid)).toBe(true);
    const card = cardsTitled(messages, 'Stop watched run longjob?')[0];
    expect(card?.card?.text).toContain(`SIGTERM to pid ${pid}`);
    const button = card?.card?.actions?.find((action) => action.label === 'Stop it');
    await shepherd.click(threadId, card?.id ?? '', button?.actionId ?? '', 'alice');
    await until(() => !alive(pid), 'the watched process to end', 10_000);
    await shepherd.waitForMessages(threadId, (all) =>
      all.some((message) => /^Stopped by alice/.test(message.card?.resolved ?? '')),
    );
    expect((await shepherd.app.features.runs.find('longjob')).status).toBe('stopped');
  });
});
