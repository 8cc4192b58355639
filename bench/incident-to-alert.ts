/**
 * How soon a person hears that a run went wrong. Prints, each the median of BENCH_INCIDENT_ROUNDS rounds
 * (default 3; the two modes alternate, so both see the same load):
 *  incident_to_alert_p50_s / _p95_s — from the moment a script writes its first NaN line (the script records
 *    its own wall time right before it) to the moment the alert card, chart included, is stored for the
 *    thread (the playground message's server timestamp), over BENCH_INCIDENTS runs (default 20) at once,
 *    with the default monitor interval of 30 s and file wake-ups on (goals: p50 ≤ 2 s, p95 ≤ 5 s);
 *  incident_to_alert_timer_only_p50_s / _p95_s — the same with the timer only (SHEPHERD_MONITOR_MAX_EVALS_PER_S=0),
 *    the baseline (up to an interval: the runs start together, so their NaNs share one phase of the timer).
 * Each run is healthy for a random 20–120 steps (0.05 s a step) before its NaN.
 * Everything (Shepherd with role `all`, a scripted LLM that is never needed) runs in this process on real Redis.
 * Run: npx tsx bench/incident-to-alert.ts  (needs Redis at REDIS_URL or 127.0.0.1:6379, and python3)
 * Env: BENCH_INCIDENTS (default 20), BENCH_INCIDENT_ROUNDS (default 3), BENCH_INCIDENT_TIMER=0 skips the
 *  timer-only baseline.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { botMessages, type PlaygroundMessage, startTestApp } from '../test/helpers/app-harness.js';
import { startScriptedOpenAi } from '../test/helpers/scripted-llm/index.js';
import { note, print, quantile } from './lib/output.js';

const incidents = Number(process.env.BENCH_INCIDENTS ?? '20');
const rounds = Number(process.env.BENCH_INCIDENT_ROUNDS ?? '3');
const withTimerBaseline = process.env.BENCH_INCIDENT_TIMER !== '0';

const script = (nanAtFile: string, healthySteps: number) => `import math, time, shepherd
for step in range(1, ${healthySteps + 40}):
    if step == ${healthySteps}:
        open(${JSON.stringify(nanAtFile)}, "w").write(repr(time.time()))
    loss = float("nan") if step >= ${healthySteps} else 2.0 / math.sqrt(step)
    shepherd.log_metrics(step=step, loss=loss)
    time.sleep(0.05)
shepherd.finish()
`;

const isAlert = (message: PlaygroundMessage) =>
  message.card?.actions?.some((action) => action.label === 'Acknowledge') === true;

async function measure(maxEvalsPerS: string): Promise<number[]> {
  const llm = await startScriptedOpenAi({ fallback: { text: 'All quiet.' } });
  const workspace = mkdtempSync(join(tmpdir(), 'shepherd-bench-incident-'));
  const shepherd = await startTestApp({
    environment: {
      SHEPHERD_LLM_BASE_URL: llm.url,
      SHEPHERD_LLM_MODEL: 'bench-model',
      SHEPHERD_WORKSPACE: workspace,
      SHEPHERD_MONITOR_INTERVAL_S: '30',
      SHEPHERD_MONITOR_MAX_EVALS_PER_S: maxEvalsPerS,
      SHEPHERD_APPROVERS: 'bob',
    },
  });
  try {
    // The runs are asked for one at a time (20 creations at once can outwait the creation lock on a loaded
    // machine), then all approved at once, so the 20 runs train side by side.
    const pending: Array<{ threadId: string; cardId: string; actionId: string; nanAtFile: string }> = [];
    for (let index = 0; index < incidents; index++) {
      const nanAtFile = join(workspace, `nan_at_${index}`);
      writeFileSync(
        join(workspace, `nan${index}.py`),
        script(nanAtFile, 20 + Math.floor(Math.random() * 100)),
      );
      const threadId = await shepherd.mention(`run nan${index}.py --gpus 0`);
      const card = (
        await shepherd.waitForMessages(threadId, (all) => botMessages(all).some((m) => m.card), 120_000)
      )
        .filter((m) => m.card?.actions?.some((action) => action.label === 'Approve'))
        .at(0);
      const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
      pending.push({ threadId, cardId: card?.id ?? '', actionId: approve?.actionId ?? '', nanAtFile });
    }
    const delays = await Promise.all(
      pending.map(async ({ threadId, cardId, actionId, nanAtFile }) => {
        const clicked = await shepherd.click(threadId, cardId, actionId, 'bob');
        if (clicked.status !== 200) throw new Error(`approve answered ${clicked.status}`);
        const messages = await shepherd.waitForMessages(threadId, (all) => all.some(isAlert), 120_000);
        const alert = messages.find(isAlert);
        const nanAt = Number(readFileSync(nanAtFile, 'utf8')) * 1000;
        return ((alert?.ts ?? Number.NaN) - nanAt) / 1000;
      }),
    );
    return delays;
  } finally {
    await shepherd.stop();
    await llm.close();
    rmSync(workspace, { recursive: true, force: true });
  }
}

/** The median of a few rounds' figures (the middle one of three). */
const median = (values: readonly number[]) => quantile(values, 0.5);
const modes = [
  { name: 'incident_to_alert', maxEvalsPerS: '2', label: 'file wake-ups on' },
  ...(withTimerBaseline
    ? [{ name: 'incident_to_alert_timer_only', maxEvalsPerS: '0', label: 'timer only' }]
    : []),
];
const figures = new Map(modes.map((mode) => [mode.name, { p50: [] as number[], p95: [] as number[] }]));
note(`${incidents} NaN incidents at once, monitor interval 30 s, ${rounds} rounds of each mode, alternating`);
for (let round = 1; round <= rounds; round++) {
  for (const mode of modes) {
    const delays = await measure(mode.maxEvalsPerS);
    const p50 = quantile(delays, 0.5);
    const p95 = quantile(delays, 0.95);
    figures.get(mode.name)?.p50.push(p50);
    figures.get(mode.name)?.p95.push(p95);
    const load = loadavg()[0]?.toFixed(1);
    note(
      `round ${round}, ${mode.label}: p50 ${p50.toFixed(2)} s, p95 ${p95.toFixed(2)} s (load average ${load})`,
    );
  }
}
for (const mode of modes) {
  const figure = figures.get(mode.name);
  print(`${mode.name}_p50_s`, median(figure?.p50 ?? []));
  print(`${mode.name}_p95_s`, median(figure?.p95 ?? []));
}
process.exit(0);
