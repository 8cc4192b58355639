import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/* The run page's buttons (`POST /api/runs/:run/actions`) follow chat's rules: who may change a run. */
describe('runs API permissions', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let runId = '';

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'noted' } });
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_APPROVERS: 'web:bob',
        SHEPHERD_STOP_GRACE_S: '2',
      },
      overrides: { runEnvironment: { ...process.env, HEALTHY_STEPS: '100000', HEALTHY_SLEEP: '0.05' } },
    });
    const threadId = await shepherd.mention('run test/fixtures/healthy_train.py --gpus 0 --name api-run');
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      cardsTitled(all, 'api-run').some((message) => message.card?.actions?.length),
    );
    const card = cardsTitled(messages, 'api-run')[0];
    const approve = card?.card?.actions?.find((action) => action.actionId.startsWith('approve'));
    expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);
    runId = (await shepherd.app.features.runs.find('api-run')).id;
  }, 60_000);

  afterAll(async () => {
    if (shepherd !== undefined) {
      for (const run of await shepherd.app.features.runs.list()) {
        if (run.status === 'running' || run.status === 'queued' || run.status === 'paused') {
          await shepherd.app.features.runs.service.stop(run.id, 'system').catch(() => undefined);
        }
      }
      await shepherd.stop();
    }
    await llm?.close();
  }, 60_000);

  const act = (action: string, user: string) =>
    fetch(`${shepherd.url}/api/runs/${runId}/actions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ action, user }),
    });

  it('refuses someone who is neither the requester nor an approver, and reserved names', async () => {
    const refused = await act('stop', 'mallory');
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: string }).error).toMatch(/mallory|approver|requester/i);
    expect((await act('pause', 'Shepherd')).status).toBe(400);
    expect((await act('explode', 'bob')).status).toBe(400);
    const run = await shepherd.app.features.runs.find(runId);
    expect(['running', 'queued']).toContain(run.status);
  });

  it('lets an approver pause and serves the run, its log and 404s', async () => {
    const paused = await act('pause', 'bob');
    expect(paused.status).toBe(200);
    expect(((await paused.json()) as { message: string }).message).toMatch(/^Paused api-run/);
    expect((await shepherd.app.features.runs.find(runId)).status).toBe('paused');
    const again = await act('pause', 'bob');
    expect(again.status).toBe(409);
    const detail = (await (await fetch(`${shepherd.url}/api/runs/${runId}`)).json()) as {
      run: { name: string; status: string; requester: string; thread: { href?: string } };
    };
    expect(detail.run).toMatchObject({ name: 'api-run', status: 'paused', requester: 'alice' });
    expect(detail.run.thread.href).toMatch(/^#ml-runs\/m\d+$/);
    const log = (await (await fetch(`${shepherd.url}/api/runs/${runId}/log?lines=5`)).json()) as {
      lines: string[];
    };
    expect(log.lines.length).toBeGreaterThan(0);
    expect(log.lines.length).toBeLessThanOrEqual(5);
    expect((await fetch(`${shepherd.url}/api/runs/no-such-run`)).status).toBe(404);
    expect((await fetch(`${shepherd.url}/api/runs/${runId}/log?lines=-1`)).status).toBe(400);
  });
});
