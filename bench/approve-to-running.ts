/**
 * From the Approve click to the training process's first line, for a local run. Prints:
 *  approve_to_running_p50_s / _p90_s — t0 right before the playground click (`POST /api/actions`), t1 the wall
 *    time the script prints as its first statement (goal p50 ≤ 0.5 s);
 *  python_startup_p50_s — the same script started directly with python3 (interpreter start-up, which is
 *    part of t1 − t0 and not Shepherd's doing).
 * Everything (Shepherd with role `all`, a scripted LLM that is never needed) runs in this process on real Redis.
 * Run: npx tsx bench/approve-to-running.ts  (needs Redis at REDIS_URL or 127.0.0.1:6379, and python3)
 * Env: BENCH_APPROVE_SAMPLES (default 10).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestApp } from '../test/helpers/app-harness.js';
import { startScriptedOpenAi } from '../test/helpers/scripted-llm/index.js';
import { note, print, quantile } from './lib/output.js';

const samples = Number(process.env.BENCH_APPROVE_SAMPLES ?? '10');
const script = (startedFile: string) =>
  `import time\nopen(${JSON.stringify(startedFile)}, "w").write(repr(time.time()))\nprint("started", flush=True)\n`;

const llm = await startScriptedOpenAi({ fallback: { text: 'ok' } });
const workspace = mkdtempSync(join(tmpdir(), 'shepherd-bench-approve-'));
const shepherd = await startTestApp({
  environment: {
    SHEPHERD_LLM_BASE_URL: llm.url,
    SHEPHERD_LLM_MODEL: 'bench-model',
    SHEPHERD_WORKSPACE: workspace,
    SHEPHERD_APPROVERS: 'bob',
  },
});

// The interpreter Shepherd starts runs with: its start-up is measured on its own.
const python = shepherd.config.runs.python;
const delays: number[] = [];
const startups: number[] = [];
try {
  for (let index = 0; index < samples; index++) {
    const startedFile = join(workspace, `started_${index}`);
    writeFileSync(join(workspace, `first${index}.py`), script(startedFile));
    const before = Date.now();
    execFileSync(python, [join(workspace, `first${index}.py`)]);
    startups.push(Number(readFileSync(startedFile, 'utf8')) - before / 1000);
    rmSync(startedFile);

    const threadId = await shepherd.mention(`run first${index}.py --gpus 0`);
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      all.some((m) => m.card?.actions?.some((action) => action.label === 'Approve')),
    );
    const card = messages.find((m) => m.card?.actions?.some((action) => action.label === 'Approve'));
    const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
    const clickedAt = Date.now();
    const clicked = await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob');
    if (clicked.status !== 200) throw new Error(`approve answered ${clicked.status}`);
    const deadline = Date.now() + 30_000;
    let startedAt = Number.NaN;
    while (Date.now() < deadline) {
      try {
        const text = readFileSync(startedFile, 'utf8');
        // An empty file: the script opened it and has not written yet.
        startedAt = text === '' ? Number.NaN : Number(text) * 1000;
        if (Number.isFinite(startedAt)) break;
      } catch {
        // not started yet
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    delays.push((startedAt - clickedAt) / 1000);
    note(`sample ${index + 1}: ${((startedAt - clickedAt) / 1000).toFixed(3)} s`);
  }
} finally {
  await shepherd.stop();
  await llm.close();
  rmSync(workspace, { recursive: true, force: true });
}
print('approve_to_running_p50_s', quantile(delays, 0.5));
print('approve_to_running_p90_s', quantile(delays, 0.9));
print('python_startup_p50_s', quantile(startups, 0.5));
process.exit(0);
