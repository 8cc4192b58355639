import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { CHROMIUM, hasChromium, launchChromium, openPage } from '../helpers/browser.js';
import { cardsTitled } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/*
 * The runs panel and a run's page on the whole app (real Redis, workers, local executor, a real training
 * child process), driven in headless Chromium.
 */

async function launchApproved(shepherd: TestApp, name: string, what: string): Promise<string> {
  const command = what.startsWith('-- ')
    ? `run --gpus 0 --name ${name} ${what}`
    : `run ${what} --gpus 0 --name ${name}`;
  const threadId = await shepherd.mention(`@shepherd ${command}`, 'alice');
  const messages = await shepherd.waitForMessages(threadId, (current) =>
    cardsTitled(current, name).some((message) => message.card?.actions?.length),
  );
  const card = cardsTitled(messages, name)[0];
  const approve = card?.card?.actions?.find((action) => action.actionId.startsWith('approve'));
  expect(approve).toBeDefined();
  const click = await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob');
  expect(click.status).toBe(200);
  return threadId;
}

describe.skipIf(!hasChromium)(`runs panel and run page in headless Chromium (needs ${CHROMIUM})`, () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let browser: Browser;

  beforeAll(async () => {
    llm = await startScriptedOpenAi();
    llm.setHandler(() => ({ text: 'noted' }));
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_SELF_APPROVAL: 'false',
        SHEPHERD_STOP_GRACE_S: '2',
      },
      // Long enough to stay running through the test; ended by stop in afterAll.
      overrides: {
        runEnvironment: {
          ...process.env,
          HEALTHY_STEPS: '100000',
          HEALTHY_SLEEP: '0.05',
          FIXTURE_STEPS: '40',
          FIXTURE_AT: '20',
          FIXTURE_SLEEP: '0.03',
        },
      },
    });
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
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

  it('lists a running run live, follows its status, and draws its chart from the metrics API', async () => {
    const { page, pageErrors } = await openPage(browser);
    await page.goto(`${shepherd.url}/`);
    await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 10_000 });
    const panel = page.locator('[data-testid="runs-panel"]');
    await panel.locator('.empty', { hasText: 'no runs yet' }).waitFor({ timeout: 10_000 });

    // Launched and approved through the API while the page is open: the row appears without a reload.
    const threadId = await launchApproved(shepherd, 'panel-run', 'test/fixtures/healthy_train.py');
    const row = panel.locator('[data-testid="run-row"]', { hasText: 'panel-run' });
    await row.and(page.locator('[data-status="running"]')).waitFor({ timeout: 30_000 });
    expect(await row.locator('.run-gpus').textContent()).toBe('CPU');
    await row.locator('svg.sparkline path.spark-line').waitFor({ timeout: 20_000 });
    expect(Number(await row.locator('svg.sparkline').getAttribute('data-points'))).toBeGreaterThan(1);
    expect(await row.locator('.run-step').textContent()).toMatch(/^step \d+$/);

    // A pause typed in the thread (not on this page) turns the row to paused, live.
    await shepherd.reply(threadId, 'pause panel-run', 'alice');
    await row.and(page.locator('[data-status="paused"]')).waitFor({ timeout: 30_000 });
    expect(await row.locator('.run-status').textContent()).toBe('paused');

    // The run page: a Chart.js chart of the metrics API's loss values.
    await row.click();
    await page.waitForURL(/#run\//);
    const runId = decodeURIComponent(page.url().split('#run/')[1] ?? '');
    const chart = page.locator('canvas[data-testid="run-chart"]');
    await chart.waitFor({ timeout: 10_000 });
    const metrics = (await (await fetch(`${shepherd.url}/api/runs/${runId}/metrics`)).json()) as {
      names: string[];
      points: { values: Record<string, unknown> }[];
    };
    expect(metrics.names).toEqual(['loss', 'lr']);
    const lossPoints = metrics.points.filter((point) => point.values.loss !== undefined).length;
    expect(lossPoints).toBeGreaterThan(1);
    // The run is paused, so its metrics no longer grow: the chart holds exactly what the API serves.
    expect(await chart.getAttribute('data-metrics')).toBe('loss');
    expect(Number(await chart.getAttribute('data-points'))).toBe(lossPoints);
    // Pixels were painted on the canvas (Chart.js drew, the CSP did not block it).
    const drawn = await page.evaluate(`(() => {
      const canvas = document.querySelector('canvas[data-testid="run-chart"]');
      const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
      let painted = 0;
      for (let index = 3; index < data.length; index += 4) if (data[index] > 0) painted += 1;
      return painted;
    })()`);
    expect(drawn).toBeGreaterThan(100);

    // Dragging across the chart zooms to those steps; "reset zoom" shows them all again.
    const box = await chart.boundingBox();
    if (box === null) throw new Error('chart has no box');
    expect(await chart.getAttribute('data-zoom')).toBeNull();
    await page.mouse.move(box.x + box.width * 0.35, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.65, box.y + box.height / 2, { steps: 5 });
    await page.mouse.up();
    const zoom = /^(-?\d+)\.\.(-?\d+)$/.exec((await chart.getAttribute('data-zoom')) ?? '');
    expect(zoom).not.toBeNull();
    expect(Number(zoom?.[1])).toBeLessThan(Number(zoom?.[2]));
    await page.locator('[data-testid="zoom-reset"]').click();
    expect(await chart.getAttribute('data-zoom')).toBeNull();

    // Picking a second metric redraws with both.
    await page.locator('input[data-metric="lr"]').check();
    await page
      .locator('canvas[data-testid="run-chart"][data-metrics="loss,lr"]')
      .waitFor({ timeout: 10_000 });
    expect(await page.locator('[data-testid="run-log"]').textContent()).toContain('starting after step');
    expect(await page.locator('[data-testid="run-thread-link"]').getAttribute('href')).toMatch(/^#ml-runs\//);

    // The page's Stop button goes through the same operations as chat: the row turns to stopped.
    await page.locator('button[data-run-action="stop"]').click();
    await page
      .locator('.run-head .card-note.ok', { hasText: 'Stopped panel-run' })
      .waitFor({ timeout: 30_000 });
    await row.and(page.locator('[data-status="stopped"]')).waitFor({ timeout: 30_000 });
    expect((await shepherd.app.features.runs.find('panel-run')).status).toBe('stopped');

    // Back to the thread from the run page.
    await page.locator('[data-testid="run-thread-link"]').click();
    await page.locator('#chat-view:not([hidden]) .message', { hasText: 'pause panel-run' }).waitFor();
    expect(pageErrors).toEqual([]);
    await page.context().close();
  }, 120_000);

  it('offers only the actions that apply to the run as it is (issue 26 §6)', async () => {
    await launchApproved(shepherd, 'actions-run', 'test/fixtures/healthy_train.py');
    const runs = shepherd.app.features.runs;
    const deadline = Date.now() + 30_000;
    let run = await runs.find('actions-run');
    while (run.status !== 'running' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      run = await runs.find('actions-run');
    }
    expect(run.status).toBe('running');
    const { page, pageErrors } = await openPage(browser);
    await page.goto(`${shepherd.url}/#run/${run.id}`);
    const head = page.locator('.run-head');
    const buttons = async () =>
      head
        .locator('button[data-run-action]')
        .evaluateAll((all) =>
          all.map((button) => `${button.getAttribute('data-run-action')}:${button.className}`),
        );
    await head.locator('.run-status', { hasText: 'running' }).waitFor({ timeout: 10_000 });
    // Running: Pause and Stop; no Resume, least of all as the primary button.
    expect(await buttons()).toEqual(['pause:action default', 'stop:action danger']);

    await head.locator('button[data-run-action="pause"]').click();
    await head.locator('.run-status', { hasText: 'paused' }).waitFor({ timeout: 30_000 });
    expect(await buttons()).toEqual(['resume:action primary', 'stop:action danger']);

    await head.locator('button[data-run-action="stop"]').click();
    await head.locator('.run-status', { hasText: 'stopped' }).waitFor({ timeout: 30_000 });
    expect(await buttons()).toEqual([]);
    // The API says the same, for any other client.
    const answer = await fetch(`${shepherd.url}/api/runs/${run.id}`);
    expect(answer.status).toBe(200);
    expect(((await answer.json()) as { run: { actions: string[] } }).run.actions).toEqual([]);
    expect(pageErrors).toEqual([]);
    await page.context().close();
  }, 90_000);

  it('marks NaN values on the run page and in the sparkline', async () => {
    // A command run, so the fixture finds its helper module next to it.
    await launchApproved(shepherd, 'nan-run', '-- python3 -u test/fixtures/monitor_nan.py');
    const deadline = Date.now() + 40_000;
    let run = await shepherd.app.features.runs.find('nan-run');
    while (run.status !== 'completed' && run.status !== 'failed' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      run = await shepherd.app.features.runs.find('nan-run');
    }
    const metrics = (await (await fetch(`${shepherd.url}/api/runs/${run.id}/metrics?names=loss`)).json()) as {
      points: { step: number; values: Record<string, unknown> }[];
    };
    const nanSteps = metrics.points.filter((point) => point.values.loss === 'NaN').map((point) => point.step);
    expect(nanSteps.length).toBeGreaterThan(0);
    expect(nanSteps[0]).toBe(20);

    const { page, pageErrors } = await openPage(browser);
    await page.goto(`${shepherd.url}/#run/${run.id}`);
    const note = page.locator('[data-testid="nan-note"]');
    await note.waitFor({ timeout: 10_000 });
    expect(await note.textContent()).toContain('loss NaN at step 20');
    const chart = page.locator('canvas[data-testid="run-chart"]');
    // One point per record on the line (NaN as a gap) plus one red cross per NaN.
    expect(Number(await chart.getAttribute('data-points'))).toBe(metrics.points.length + nanSteps.length);
    const row = page.locator('[data-testid="run-row"]', { hasText: 'nan-run' });
    await row.locator('svg.sparkline circle.spark-bad').first().waitFor({ timeout: 10_000 });
    expect(pageErrors).toEqual([]);
    await page.context().close();
  }, 90_000);
});
