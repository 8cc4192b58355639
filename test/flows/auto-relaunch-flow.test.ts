import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { trainingChild, trainScript } from '../helpers/relaunch-script.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { waitFor } from '../runs/harness.js';

/**
 * Issue 22, automatic relaunch: a real training process (stdlib Python with the `shepherd` helper, a
 * checkpoint every 10 steps) is killed with SIGKILL from outside, as the OOM killer or a lost node would.
 * Shepherd relaunches it from its last checkpoint with one line in the thread, no LLM call and no card;
 * when the retries are spent the run fails with one alert that lists them; a Python exception in the
 * script is not retried but triaged as before.
 */

const relaunchLines = (messages: PlaygroundMessage[]) =>
  botMessages(messages).filter((m) =>
    /; relaunched (from step [\d,]+|from scratch), retry \d+ of \d+$/.test(m.text),
  );

const checkpointSteps = (runDir: string) =>
  (existsSync(join(runDir, 'checkpoints.jsonl'))
    ? readFileSync(join(runDir, 'checkpoints.jsonl'), 'utf8')
    : ''
  )
    .trim()
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => (JSON.parse(line) as { step: number }).step);

describe('automatic relaunch after an infrastructure failure (issue 22)', () => {
  let llm: ScriptedLlmServer | undefined;
  let shepherd: TestApp | undefined;
  let workspace: string | undefined;

  afterEach(async () => {
    for (const run of (await shepherd?.app.features.runs.list()) ?? []) {
      if (run.status === 'running') await shepherd?.app.features.runs.service.stop(run.id, 'system');
    }
    await shepherd?.stop();
    await llm?.close();
    if (workspace !== undefined) rmSync(workspace, { recursive: true, force: true });
  });

  async function start(environment: Record<string, string> = {}): Promise<TestApp> {
    llm = await startScriptedOpenAi({
      fallback: () => ({
        text: JSON.stringify({ decision: 'WARNING', diagnosis: 'a bad batch; look at it' }),
      }),
    });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-relaunch-'));
    writeFileSync(join(workspace, 'train_ok.py'), trainScript({ steps: 120 }));
    writeFileSync(join(workspace, 'train_bug.py'), trainScript({ steps: 120, raiseAt: 25 }));
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_PYTHON: '/usr/bin/python3',
        SHEPHERD_MONITOR_INTERVAL_S: '0.25',
        SHEPHERD_APPROVERS: 'bob',
        ...environment,
      },
    });
    return shepherd;
  }

  async function launch(app: TestApp, script: string, name: string) {
    const threadId = await app.mention(`run ${script} --gpus 0 --name ${name}`, 'alice');
    const messages = await app.waitForMessages(
      threadId,
      (all) => cardsTitled(all, `Approve training run: ${name}`).length >= 1,
      60_000,
    );
    const card = cardsTitled(messages, `Approve training run: ${name}`)[0];
    const approve = card?.card?.actions?.find((item) => item.label === 'Approve');
    expect((await app.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);
    const run = await waitFor(async () => {
      const meta = await app.app.features.runs.find(name);
      return meta.status === 'running' ? meta : undefined;
    }, 30_000);
    return { threadId, run, runDir: join(app.dataDir, 'runs', run.id) };
  }

  /** SIGKILLs launch `launch`'s training process once it saved a checkpoint at or past `afterStep`. */
  async function killTraining(
    app: TestApp,
    runId: string,
    runDir: string,
    launch: number,
    afterStep: number,
  ) {
    const meta = await waitFor(async () => {
      const current = await app.app.features.runs.find(runId);
      return current.launchCount === launch && current.status === 'running' ? current : undefined;
    }, 30_000);
    await waitFor(() => checkpointSteps(runDir).some((step) => step >= afterStep) || undefined, 60_000);
    const child = await waitFor(() => trainingChild(meta.pid ?? 0), 10_000, 'the training process');
    process.kill(child, 'SIGKILL');
    // The process is dead: nothing saves any more, so the last checkpoint is known now.
    return Math.max(...checkpointSteps(runDir));
  }

  it('a kill -9 from outside is relaunched from the last checkpoint with one line, then completes', async () => {
    const app = await start();
    const { threadId, run, runDir } = await launch(app, 'train_ok.py', 'kill9');
    const lastSaved = await killTraining(app, run.id, runDir, 1, 30);

    const messages = await app.waitForMessages(
      threadId,
      (all) => botMessages(all).some((m) => /finished$/.test(m.card?.title ?? '')),
      60_000,
    );
    const lines = relaunchLines(messages);
    expect(lines).toHaveLength(1);
    expect(lines[0]?.text).toMatch(
      new RegExp(
        `^kill9: killed at step \\d+ \\(SIGKILL, no stop requested\\); relaunched from step ${lastSaved}, retry 1 of 2$`,
      ),
    );
    const output = readFileSync(join(runDir, 'output.log'), 'utf8');
    expect(output).toContain(`resumed from step ${lastSaved}`);
    const completed = await waitFor(async () => {
      const meta = await app.app.features.runs.find(run.id);
      return meta.status === 'completed' ? meta : undefined;
    }, 30_000);
    expect(completed.launchCount).toBe(2);
    expect(completed.autoRelaunches).toMatchObject([{ launch: 1, from: lastSaved }]);
    // No crash card, no triage, no LLM call; the relaunch is in the audit log.
    expect(cardsTitled(messages, 'kill9 failed')).toEqual([]);
    expect(llm?.requests ?? []).toHaveLength(0);
    const audit = readFileSync(join(runDir, 'audit.jsonl'), 'utf8');
    expect(audit).toMatch(
      /"from":"running","to":"queued","by":"system","reason":"automatic relaunch 1 of 2: killed at step/,
    );
  }, 120_000);

  it('when the retries are spent the run fails with one alert that lists them, without triage', async () => {
    const app = await start({ SHEPHERD_AUTO_RETRIES: '1' });
    const { threadId, run, runDir } = await launch(app, 'train_ok.py', 'budget');
    const firstSaved = await killTraining(app, run.id, runDir, 1, 20);
    await app.waitForMessages(threadId, (all) => relaunchLines(all).length === 1, 30_000);
    await killTraining(app, run.id, runDir, 2, firstSaved + 10);

    const messages = await app.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'budget failed').length >= 1,
      30_000,
    );
    const failed = await app.app.features.runs.find(run.id);
    expect(failed.status).toBe('failed');
    expect(failed.statusReason).toMatch(
      /^killed by SIGKILL; no automatic relaunch left: retry 1 of 1: killed at step \d+/,
    );
    const alerts = cardsTitled(messages, 'budget failed');
    expect(alerts).toHaveLength(1);
    const alert = JSON.stringify(alerts[0]?.card);
    expect(alert).toContain('No automatic relaunch left after 1');
    expect(alert).toMatch(
      new RegExp(
        `retry 1 of 1: killed at step \\d+ \\(SIGKILL, no stop requested\\); relaunched from step ${firstSaved}`,
      ),
    );
    expect(relaunchLines(messages)).toHaveLength(1);
    expect(llm?.requests ?? []).toHaveLength(0);
  }, 120_000);

  it('a Python exception in the script is not relaunched: it fails and goes to triage as before', async () => {
    const app = await start();
    const { threadId, run } = await launch(app, 'train_bug.py', 'bug');
    const messages = await app.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'bug failed').length >= 1,
      60_000,
    );
    expect(JSON.stringify(cardsTitled(messages, 'bug failed')[0]?.card)).toContain('ValueError');
    // Triage asks the model about the crash.
    await waitFor(() => ((llm?.requests.length ?? 0) > 0 ? true : undefined), 30_000, 'the triage call');
    // The crash card comes from the monitor at once; the runs refresh records the failure (every 2 s).
    const meta = await waitFor(async () => {
      const current = await app.app.features.runs.find(run.id);
      return current.status === 'running' ? undefined : current;
    }, 30_000);
    expect(meta.status).toBe('failed');
    expect(meta.launchCount).toBe(1);
    expect(meta.autoRelaunches).toBeUndefined();
    expect(relaunchLines(await app.messages(threadId))).toEqual([]);
  }, 120_000);
});
