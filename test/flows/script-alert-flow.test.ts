import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PYTHON_RUNTIME_DIR } from '../../src/runs/records/run-files.js';
import { botMessages, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled, fetchesPng } from '../helpers/flow.js';
import { type MonitoredFlow, startMonitoredFlow } from '../helpers/monitored-flow.js';

/*
 * `shepherd.alert(...)` from a real training process: the alert card is posted once into the run's thread
 * with the run's chart, its repeat within wait_duration is not, and without Shepherd the alert is printed.
 * The W&B line the script prints at start puts the run's W&B link on its cards (the started card is
 * edited to show it), in `status` and on its page.
 */

// What wandb.init prints (wandb/sdk/wandb_run.py `_header_run_info`), colours included.
const WANDB_URL = 'https://wandb.ai/team/proj/runs/abc123';
const SCRIPT = `import math, time, shepherd
try:
    import wandb
except ImportError:
    wandb = None
print("wandb: \\U0001F680 View run \\x1b[33mglad-sun-3\\x1b[0m at: \\x1b[34m\\x1b[4m${WANDB_URL}\\x1b[0m", flush=True)
for step in range(1, 41):
    shepherd.log_metrics(step=step, loss=3.0 / math.sqrt(1 + step / 10.0), accuracy=0.1)
    if step in (5, 10):
        posted = shepherd.alert("Low accuracy", "accuracy 0.10 < 0.5", level="warn")
        print("alert at step", step, "posted" if posted else "suppressed", flush=True)
    time.sleep(0.03)
shepherd.finish()
`;

describe('alerts raised by the script', () => {
  let flow: MonitoredFlow;
  let shepherd: TestApp;

  beforeAll(async () => {
    flow = await startMonitoredFlow('script-alert-flow', () => ({ 'alerting.py': SCRIPT }));
    shepherd = flow.shepherd;
  });
  afterAll(() => flow?.stop());

  it('posts the alert once, with the run chart; the repeat within wait_duration is suppressed', async () => {
    const threadId = await shepherd.mention('run alerting.py --gpus 0', 'alice');
    const launch = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'alerting').length > 0,
      30_000,
    );
    const card = cardsTitled(launch, 'alerting')[0];
    // No SHEPHERD_RUN_ENV_WANDB_API_KEY and no WANDB_MODE=offline here: the card says so.
    expect(card?.card?.text).toMatch(/imports wandb, but no W&B key reaches the run/);
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(200);

    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => botMessages(all).some((message) => message.card?.title === 'alerting finished'),
      90_000,
    );
    const alerts = cardsTitled(messages, 'Low accuracy');
    expect(alerts).toHaveLength(1);
    expect(alerts[0]?.card?.title).toBe('alerting: Low accuracy');
    expect(alerts[0]?.card?.text).toMatch(/Warning from the script at step 5: accuracy 0\.10 < 0\.5/);
    expect(alerts[0]?.card?.actions?.map((action) => action.label)).toContain('Acknowledge');
    const chart = alerts[0]?.card?.imageUrl ?? alerts[0]?.images?.[0];
    expect(await fetchesPng(shepherd.url, chart)).toBe(true);
    const wandb = { label: 'W&B', value: WANDB_URL };
    expect(alerts[0]?.card?.fields).toContainEqual(wandb);
    expect(cardsTitled(messages, 'alerting finished')[0]?.card?.fields).toContainEqual(wandb);
    // The started card (the approval card, resolved) is edited once the link is found; still resolved.
    const started = await shepherd.waitForMessages(threadId, (all) =>
      all.some(
        (message) => message.id === card?.id && (message.card?.fields ?? []).some((f) => f.label === 'W&B'),
      ),
    );
    const edited = started.find((message) => message.id === card?.id);
    expect(edited?.card?.fields).toContainEqual(wandb);
    expect(edited?.card?.resolved).toMatch(/^Approved by bob/);
    expect(edited?.card?.fields?.filter((field) => field.label === 'W&B')).toHaveLength(1);

    const runDir = join(shepherd.dataDir, 'runs');
    const runId = readdirSync(runDir)[0] ?? '';
    const output = readFileSync(join(runDir, runId, 'output.log'), 'utf8');
    expect(output).toMatch(/alert at step 5 posted/);
    expect(output).toMatch(/alert at step 10 suppressed/);
    const records = readFileSync(join(runDir, runId, 'alerts.jsonl'), 'utf8')
      .trim()
      .split('\n');
    expect(records).toHaveLength(1);

    const page = await fetch(`${shepherd.url}/api/runs/${runId}`);
    expect(page.status).toBe(200);
    expect(((await page.json()) as { run: { trackers: unknown[] } }).run.trackers).toEqual([wandb]);
    await shepherd.reply(threadId, '@shepherd status alerting', 'alice');
    const status = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => message.text.includes('trackers:')),
    );
    expect(botMessages(status).find((message) => message.text.includes('trackers:'))?.text).toContain(
      `trackers: W&B ${WANDB_URL}`,
    );
  }, 150_000);

  it('prints the alert when the script runs without Shepherd', () => {
    const printed = execFileSync('/usr/bin/python3', ['-c', SCRIPT.replace('time.sleep(0.03)', 'pass')], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', PYTHONPATH: PYTHON_RUNTIME_DIR },
    });
    expect(printed).toMatch(/\[shepherd\] alert \(warn\): Low accuracy: accuracy 0\.10 < 0\.5/);
    expect(printed).toMatch(/alert at step 10 suppressed/);
    expect(printed.match(/\[shepherd\] alert/g)).toHaveLength(1);
  });
});
