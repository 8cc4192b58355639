import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { untilEvery } from '../helpers/until.js';

/*
 * Issue 23, "reproducibility, captured at launch": a command run in a named environment (a venv of the
 * system's /usr/bin/python3 holding its own `torch` distribution) in a dirty git workspace. `status --full`
 * must show the run environment's own pip freeze, Python and torch (not the bot's), the git commit with
 * its diff, the seed and the revision the script printed.
 */

const TRAIN = `import sys, time
print("model_revision=3f2a9c1 seed arg %s" % sys.argv[1:], flush=True)
for step in range(1, 400):
    print("step=%d loss=%.4f" % (step, 1.0 / step), flush=True)
    time.sleep(0.1)
`;

/** A stand-in `torch` with an installed distribution's metadata, so pip freeze lists it like the real one. */
function addFakeTorch(venv: string): void {
  const site = execFileSync(
    join(venv, 'bin', 'python'),
    ['-c', 'import site; print(site.getsitepackages()[0])'],
    {
      encoding: 'utf8',
    },
  ).trim();
  mkdirSync(join(site, 'torch'));
  writeFileSync(
    join(site, 'torch', '__init__.py'),
    '__version__ = "2.4.1+shepherdtest"\nclass version:\n    cuda = None\n',
  );
  mkdirSync(join(site, 'torch-2.4.1.dist-info'));
  writeFileSync(
    join(site, 'torch-2.4.1.dist-info', 'METADATA'),
    'Metadata-Version: 2.1\nName: torch\nVersion: 2.4.1\n',
  );
  writeFileSync(join(site, 'torch-2.4.1.dist-info', 'RECORD'), '');
  writeFileSync(join(site, 'torch-2.4.1.dist-info', 'INSTALLER'), 'pip\n');
}

const until = untilEvery({ timeoutMs: 60_000, intervalMs: 200 });

describe('status --full shows what a launch needs to be reproduced', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let workspace: string;
  let venvRoot: string;
  let head = '';

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'ok' } });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-repro-ws-'));
    venvRoot = mkdtempSync(join(tmpdir(), 'shepherd-repro-venv-'));
    writeFileSync(join(workspace, 'train.py'), TRAIN);
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', ...args], {
        cwd: workspace,
        encoding: 'utf8',
      });
    git('init', '-q');
    git('add', '.');
    git('commit', '-q', '-m', 'initial');
    head = git('rev-parse', 'HEAD').trim();
    // An uncommitted change the record must keep as a diff.
    writeFileSync(join(workspace, 'train.py'), `${TRAIN}# lr tweak not committed\n`);
    const venv = join(venvRoot, 'repro');
    // The system interpreter's pip stays reachable (system site packages), so pip freeze runs in the venv.
    execFileSync('/usr/bin/python3', ['-m', 'venv', '--without-pip', '--system-site-packages', venv]);
    addFakeTorch(venv);
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_MONITOR_INTERVAL_S: '0.5',
        SHEPHERD_STOP_GRACE_S: '3',
        SHEPHERD_ENVIRONMENTS: JSON.stringify({ repro: { venv } }),
      },
    });
  });

  afterAll(async () => {
    await shepherd?.stop();
    await llm?.close();
    rmSync(workspace, { recursive: true, force: true });
    rmSync(venvRoot, { recursive: true, force: true });
  });

  it('records the command, seed, git diff and the run environment, and shows them', async () => {
    const threadId = await shepherd.mention('run --name repro --env repro -- python train.py --seed 7');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, ': repro').length > 0,
    );
    const card = cardsTitled(messages, ': repro')[0] as PlaygroundMessage;
    const approve = card.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card.id, approve?.actionId ?? '', 'alice')).status).toBe(200);
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => /repro is running/.test(message.text)),
    );
    const meta = await shepherd.app.features.runs.find('repro');
    const runDir = join(shepherd.dataDir, 'runs', meta.id);
    const recordFile = join(runDir, 'launch-records', 'launch-1.json');
    const record = await until(async () => {
      try {
        const parsed = JSON.parse(readFileSync(recordFile, 'utf8')) as { environment?: unknown };
        return parsed.environment === undefined ? undefined : parsed;
      } catch {
        return undefined;
      }
    }, 'the environment probe');
    expect(record).toMatchObject({ launch: 1, seed: '7', git: { commit: head, dirty: true } });

    await shepherd.reply(threadId, '@shepherd status repro --full');
    const answered = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => message.text.includes('Reproducibility:')),
    );
    const text =
      botMessages(answered).find((message) => message.text.includes('Reproducibility:'))?.text ?? '';
    const systemPython = execFileSync(
      '/usr/bin/python3',
      ['-c', 'import platform; print(platform.python_version())'],
      {
        encoding: 'utf8',
      },
    ).trim();
    expect(text).toContain(`Python ${systemPython}`);
    expect(text).toContain('torch 2.4.1+shepherdtest');
    // pip freeze of the run's venv: the stand-in torch distribution is listed.
    expect(text).toMatch(/pip freeze \(\d+ packages\):/);
    expect(text).toContain('  torch==2.4.1');
    expect(text).toContain(`Git: ${head} (dirty; diff of`);
    expect(text).toContain('Seed: 7');
    expect(text).toContain('Command: python train.py --seed 7');
    expect(text).toContain('Model revision: 3f2a9c1');
    const diff = (JSON.parse(readFileSync(recordFile, 'utf8')) as { git: { diff: string } }).git.diff;
    expect(diff).toContain('+# lr tweak not committed');

    await shepherd.reply(threadId, '@shepherd stop repro');
    await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((message) => /^Stopped repro\.$/.test(message.text)),
      30_000,
    );
  });
});
