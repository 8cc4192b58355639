import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app-harness.js';
import { approvalCard, cardsTitled, fetchesPng } from '../helpers/flow.js';
import { type MonitoredFlow, startMonitoredFlow } from '../helpers/monitored-flow.js';

/*
 * A script that logs only to an MLflow file store (as `mlflow.log_metric` does with no tracking server:
 * `./mlruns/<experiment>/<run>/metrics/<name>`, lines `timestamp value step`) and prints nothing. The
 * monitor reads the live files tick by tick; the NaN at step 50 becomes a NaN alert card with a chart.
 * Each line is written in two halves, so ticks meet torn lines. An older MLflow run in the same store,
 * with a NaN at step 5, must not be mixed in.
 */

const script = `import math, os, time
store = os.path.join(os.getcwd(), "mlruns", "0")
def new_run(run_id):
    path = os.path.join(store, run_id)
    os.makedirs(os.path.join(path, "metrics", "train"), exist_ok=True)
    with open(os.path.join(path, "meta.yaml"), "w") as meta:
        meta.write("run_id: %s\\nexperiment_id: '0'\\nstatus: 1\\n" % run_id)
    return path
old = new_run("0ld")
with open(os.path.join(old, "metrics", "train", "loss"), "w") as file:
    for step in range(1, 10):
        file.write("%d %s %d\\n" % (1700000000000 + step, float("nan") if step >= 5 else 1.0, step))
long_ago = time.time() - 3600
os.utime(os.path.join(old, "meta.yaml"), (long_ago, long_ago))
run = new_run("c0ffee")
with open(os.path.join(run, "metrics", "train", "loss"), "a") as file:
    for step in range(1, 81):
        loss = float("nan") if step >= 50 else 3.0 / math.sqrt(1 + step / 10.0)
        line = "%d %s %d\\n" % (int(time.time() * 1000), loss, step)
        file.write(line[:9]); file.flush(); time.sleep(0.01)
        file.write(line[9:]); file.flush(); time.sleep(0.02)
`;

describe('metrics from an MLflow file store', () => {
  let flow: MonitoredFlow;
  let shepherd: TestApp;

  beforeAll(async () => {
    flow = await startMonitoredFlow('mlflow-flow', () => ({ 'mlflow_train.py': script }));
    shepherd = flow.shepherd;
  });
  afterAll(() => flow?.stop());

  it('alerts on the NaN at step 50 of a live MLflow metric file, with a chart', async () => {
    const threadId = await shepherd.mention('run mlflow_train.py --gpus 0', 'alice');
    const { card, approve } = await approvalCard(shepherd, threadId, 'mlflow');
    expect((await shepherd.click(threadId, card.id, approve, 'bob')).status).toBe(200);

    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'non-finite metric').length > 0,
      90_000,
    );
    const alerts = cardsTitled(messages, 'non-finite metric');
    expect(alerts).toHaveLength(1);
    expect(alerts[0]?.card?.title).toMatch(/non-finite metric at step 50$/);
    expect(alerts[0]?.card?.text).toMatch(/train\/loss became NaN/);
    expect(await fetchesPng(shepherd.url, alerts[0]?.card?.imageUrl ?? alerts[0]?.images?.[0])).toBe(true);

    // The points are in the derived metrics file, marked as read from MLflow, each step once, in order.
    const runDir = join(shepherd.dataDir, 'runs');
    const runId = readdirSync(runDir)[0] ?? '';
    const derived = readFileSync(join(runDir, runId, 'stdout-metrics.jsonl'), 'utf8')
      .trim()
      .split('\n');
    const steps = derived.map((line) => Number(/"step": (\d+)/.exec(line)?.[1]));
    expect(derived[0]).toContain('"source": "mlflow"');
    expect(steps.slice(0, 50)).toEqual(Array.from({ length: 50 }, (_, index) => index + 1));
  }, 150_000);
});
