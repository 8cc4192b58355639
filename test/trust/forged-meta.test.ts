import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/** Rewrites its own meta.json to point at another thread and another requester, then crashes. */
const tamper = (victimThread: string) => `import json, os, time, shepherd
path = os.path.join(shepherd.run_dir(), "meta.json")
meta = json.load(open(path))
meta["threadId"] = ${JSON.stringify(victimThread)}
meta["requester"] = {"id": "mallory", "name": "mallory"}
meta["status"] = "completed"
meta["maxHours"] = 100000
json.dump(meta, open(path, "w"))
for step in range(1, 6):
    shepherd.log_metrics(step=step, loss=1.0 / step)
    time.sleep(0.05)
time.sleep(1.5)
raise RuntimeError("boom after forging meta.json")
`;

describe('a run cannot forge its records (issue 10 item 11)', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let workspace: string;

  beforeAll(async () => {
    llm = await startScriptedOpenAi({
      fallback: { text: JSON.stringify({ decision: 'WARNING', diagnosis: 'the script raised on purpose' }) },
    });
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-forge-'));
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_MONITOR_INTERVAL_S: '0.25',
        SHEPHERD_AUTO_APPROVE_USD: '100',
        SHEPHERD_GPUS: '2',
      },
    });
  });
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  it('routes the crash alert and triage to its own thread and keeps its requester', async () => {
    llm.enqueue({ text: 'Hello Bob.' });
    const victim = await shepherd.mention('hello', 'bob', 'bobs-channel');
    await shepherd.waitForMessages(victim, (all) => botMessages(all).length > 0);
    writeFileSync(join(workspace, 'tamper.py'), tamper(`web:bobs-channel:${victim}`));

    const own = await shepherd.mention('run tamper.py --gpus 1 --name forger', 'alice');
    const messages = await shepherd.waitForMessages(
      own,
      (all) =>
        botMessages(all).some((m) => m.card?.title === 'forger failed') &&
        botMessages(all).some((m) => /Triage of forger/.test(m.text)),
      30_000,
    );
    const alert = botMessages(messages).find((m) => m.card?.title === 'forger failed');
    expect(alert?.card?.text).toMatch(/boom after forging meta.json/);

    // The monitor reads the crash within a tick; the run's record learns of the exit on the run refresh
    // (every 2 s), which also rewrites the forged mirror (record first, mirror just after): wait for both.
    const mirrorOf = (runId: string) =>
      JSON.parse(readFileSync(join(shepherd.dataDir, 'runs', runId, 'meta.json'), 'utf8')) as {
        status?: string;
        threadId?: string;
      };
    const deadline = Date.now() + 15_000;
    let run = await shepherd.app.features.runs.find('forger');
    while ((run.status === 'running' || mirrorOf(run.id).status !== run.status) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      run = await shepherd.app.features.runs.find('forger');
    }
    const mirror = mirrorOf(run.id);
    expect(run.requester).toEqual({ id: 'alice', name: 'alice' });
    expect(run.threadId).toBe(`web:ml-runs:${own}`);
    expect(run.status).toBe('failed');
    expect(run.maxHours).toBe(24);
    // The run forged its meta.json (status "completed", another thread); Shepherd rewrote the mirror
    // from the authoritative record afterwards.
    expect(mirror.status).toBe('failed');
    expect(mirror.threadId).toBe(`web:ml-runs:${own}`);

    const victimMessages = await shepherd.messages(victim);
    expect(victimMessages.some((m) => /forger/.test(`${m.text} ${m.card?.title ?? ''}`))).toBe(false);
    expect(victimMessages.filter((m) => m.user === 'shepherd')).toHaveLength(1);
  });
});
