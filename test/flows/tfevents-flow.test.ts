import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app-harness.js';
import { approvalCard, cardsTitled, fetchesPng } from '../helpers/flow.js';
import { type MonitoredFlow, startMonitoredFlow } from '../helpers/monitored-flow.js';

/*
 * A script that logs only to TensorBoard event files and prints nothing: the monitor reads the live file
 * tick by tick, and the NaN the writer puts at step 50 becomes a NaN alert card with a chart. Each record is
 * written in two halves with a pause between, so ticks meet torn records.
 */

const WRITER = fileURLToPath(new URL('../fixtures/tfevents/tfevents_writer.py', import.meta.url));
const script = (workspace: string) => `import math, os, sys, time
sys.path.insert(0, ${JSON.stringify(workspace)})
from tfevents_writer import EventWriter, event, scalar_value, tfrecord
# Under the run directory (the working directory of a script run), as SummaryWriter("runs/exp1") does.
writer = EventWriter(os.path.join(os.environ["SHEPHERD_RUN_DIR"], "runs", "exp1"))
for step in range(1, 81):
    loss = float("nan") if step >= 50 else 3.0 / math.sqrt(1 + step / 10.0)
    data = tfrecord(event(step=step, values=[scalar_value("train/loss", loss)]))
    writer._file.write(data[:7]); writer.flush(); time.sleep(0.01)
    writer._file.write(data[7:]); writer.flush(); time.sleep(0.02)
writer.close()
`;

describe('metrics from TensorBoard event files', () => {
  let flow: MonitoredFlow;
  let shepherd: TestApp;

  beforeAll(async () => {
    flow = await startMonitoredFlow('tfevents-flow', (workspace) => ({
      'tb_train.py': script(workspace),
      'tfevents_writer.py': readFileSync(WRITER, 'utf8'),
    }));
    shepherd = flow.shepherd;
  });
  afterAll(() => flow?.stop());

  it('alerts on the NaN at step 50 of a live event file, with a chart', async () => {
    const threadId = await shepherd.mention('run tb_train.py --gpus 0', 'alice');
    const { card, approve } = await approvalCard(shepherd, threadId, 'tb');
    expect((await shepherd.click(threadId, card.id, approve, 'bob')).status).toBe(200);

    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'non-finite metric').length > 0,
      90_000,
    );
    const alert = cardsTitled(messages, 'non-finite metric')[0];
    expect(alert?.card?.title).toMatch(/non-finite metric at step 50$/);
    expect(alert?.card?.text).toMatch(/train\/loss became NaN/);
    expect(await fetchesPng(shepherd.url, alert?.card?.imageUrl ?? alert?.images?.[0])).toBe(true);

    // The points are in the derived metrics file, marked as read from event files, each step once.
    const runDir = join(shepherd.dataDir, 'runs');
    const runId = readdirSync(runDir)[0] ?? '';
    const derived = readFileSync(join(runDir, runId, 'stdout-metrics.jsonl'), 'utf8')
      .trim()
      .split('\n');
    const steps = derived.map((line) => Number(/"step": (\d+)/.exec(line)?.[1]));
    expect(derived[0]).toContain('"source": "tfevents"');
    expect(steps.slice(0, 50)).toEqual(Array.from({ length: 50 }, (_, index) => index + 1));
  }, 150_000);
});
