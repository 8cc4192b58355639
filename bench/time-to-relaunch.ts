/**
 * Time to relaunch (issue 22): a local run (stdlib Python with the `shepherd` helper, a step every 50 ms,
 * a checkpoint every 10 steps) is killed with SIGKILL from outside, as the OOM killer or a lost node
 * would; Shepherd notices, relaunches it from its last checkpoint and the new process logs its first step.
 * Prints:
 *  time_to_relaunch_s — median, from the kill to the first step the new launch logged (goal ≤ 10 s plus
 *    the script's own start-up time);
 *  script_startup_s — median, from the relaunch's spawn (meta.startedAt) to that first step: the part the
 *    script itself takes (Python start-up, the helper import, reading its checkpoint);
 *  time_to_relaunch_max_s — the slowest sample.
 * Shepherd (role `all`, playground, real Redis) runs in this process; the relaunch decision waits for the
 * periodic runs refresh (every 2 s), so the figure moves with where in that period the kill falls.
 * Run: npx tsx bench/time-to-relaunch.ts  (needs Redis at REDIS_URL or 127.0.0.1:6379)
 * Env: BENCH_RELAUNCH_SAMPLES (default 5).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestApp } from '../test/helpers/app-harness.js';
import { trainingChild, trainScript } from '../test/helpers/relaunch-script.js';
import { note, print, quantile } from './lib/output.js';

const samples = Number(process.env.BENCH_RELAUNCH_SAMPLES ?? '5');
const workspace = mkdtempSync(join(tmpdir(), 'shepherd-bench-relaunch-'));
writeFileSync(join(workspace, 'train.py'), trainScript({ steps: 100_000 }));

const app = await startTestApp({
  environment: {
    SHEPHERD_WORKSPACE: workspace,
    SHEPHERD_PYTHON: '/usr/bin/python3',
    SHEPHERD_AUTO_RETRIES: String(samples),
    SHEPHERD_MONITOR_INTERVAL_S: '1',
    SHEPHERD_LOG_LEVEL: 'warn',
  },
});

async function until<T>(
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
  what: string,
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const service = app.app.features.runs.service;
const fileSize = (path: string) => (existsSync(path) ? statSync(path).size : 0);

try {
  const threadId = await app.mention('run train.py --gpus 0 --name relaunch-bench', 'alice');
  const card = await until(
    async () =>
      (await app.messages(threadId)).find((message) => message.card?.title?.includes('Approve training run')),
    60_000,
    'the approval card',
  );
  const approve = card.card?.actions?.find((action) => action.label === 'Approve');
  const clicked = await app.click(threadId, card.id, approve?.actionId ?? '', 'bob');
  if (clicked.status !== 200) throw new Error(`approve answered ${clicked.status}`);
  const run = await app.app.features.runs.find('relaunch-bench');
  const runDir = join(app.dataDir, 'runs', run.id);
  const metrics = join(runDir, 'metrics.jsonl');
  const checkpoints = join(runDir, 'checkpoints.jsonl');
  const totals: number[] = [];
  const startups: number[] = [];
  for (let sample = 1; sample <= samples; sample++) {
    const meta = await until(
      async () => {
        const current = await app.app.features.runs.find(run.id);
        return current.status === 'running' && current.launchCount === sample ? current : undefined;
      },
      60_000,
      `launch ${sample}`,
    );
    // A checkpoint saved by this launch, so the relaunch has something to resume from.
    const savedBefore = fileSize(checkpoints);
    await until(() => (fileSize(checkpoints) > savedBefore ? true : undefined), 60_000, 'a checkpoint');
    const child = await until(() => trainingChild(meta.pid ?? 0), 10_000, 'the training process');
    const before = fileSize(metrics);
    process.kill(child, 'SIGKILL');
    const killedAt = Date.now();
    // The dead process writes nothing more: the first line after this offset is the new launch's.
    await until(() => (fileSize(metrics) > before ? true : undefined), 60_000, 'the first new step');
    const firstStepAt = Date.now();
    const relaunched = await app.app.features.runs.find(run.id);
    const spawnedAt = Date.parse(relaunched.startedAt ?? '');
    totals.push((firstStepAt - killedAt) / 1000);
    startups.push((firstStepAt - spawnedAt) / 1000);
    const line = readFileSync(metrics, 'utf8').slice(before).split('\n')[0];
    note(`sample ${sample}: ${(firstStepAt - killedAt) / 1000} s (first new line ${line})`);
  }
  print('time_to_relaunch_s', quantile(totals, 0.5));
  print('script_startup_s', quantile(startups, 0.5));
  print('time_to_relaunch_max_s', Math.max(...totals));
} finally {
  for (const meta of await app.app.features.runs.list()) {
    if (meta.status === 'running') await service.stop(meta.id, 'system');
  }
  await app.stop();
  rmSync(workspace, { recursive: true, force: true });
}
