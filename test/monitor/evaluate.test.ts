import { describe, expect, it } from 'vitest';
import { evaluate, type NewLines, needsCrashLog } from '../../src/monitor/evaluate.js';
import { createMonitorState, type MonitorState } from '../../src/monitor/monitor-state.js';
import type { AlertPolicy } from '../../src/monitor/policy-checks.js';
import { createPrintedMetricsReader } from '../../src/monitor/printed-metrics.js';
import { DEFAULT_ROLLING_LIMITS } from '../../src/monitor/rolling-stats.js';
import type { TickContext } from '../../src/monitor/tick-context.js';
import { DEFAULT_DETECTOR_CONFIG } from '../../src/monitor/types.js';
import type { ProcessState } from '../../src/runs/executor.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';

/*
 * Issue 16 seam 3: the monitor tick's evaluation is a function of (state, new lines, process state, now),
 * tested here without Redis or files.
 */

const alive: ProcessState = { kind: 'alive' };
const meta: RunMeta = {
  schemaVersion: 1,
  id: 'r1',
  name: 'qwen-gsm8k',
  threadId: 'web:c:t',
  requester: { id: 'u', name: 'u' },
  status: 'running',
  gpus: 0,
  gpuIndices: [],
  maxHours: 1,
  scriptVersion: 1,
  executor: 'local',
  launchCount: 1,
  createdAt: new Date(0).toISOString(),
  updatedAt: new Date(0).toISOString(),
  startedAt: new Date(0).toISOString(),
};

function context(overrides: Partial<TickContext> = {}): TickContext {
  return {
    meta,
    detectors: { ...DEFAULT_DETECTOR_CONFIG, stallS: 120 },
    limits: DEFAULT_ROLLING_LIMITS,
    printedMetrics: createPrintedMetricsReader({}),
    ...overrides,
  };
}

const lines = (...values: string[]): NewLines => ({ lines: values, reset: false, more: false });
const none = lines();
const metric = (step: number, loss: number | string) => `{"step": ${step}, "loss": ${loss}}`;

/** Feeds `steps` healthy points (one per second of `now`) and returns the state. */
function warmUp(steps: number): MonitorState {
  const state = createMonitorState();
  for (let step = 0; step < steps; step++) {
    const result = evaluate(
      state,
      lines(metric(step, 2 - step * 0.001)),
      none,
      alive,
      step * 1000,
      context(),
    );
    expect(result.incidents).toEqual([]);
  }
  return state;
}

describe('evaluate', () => {
  it('reads new metric lines into the state and counts ticks and points', () => {
    const state = createMonitorState();
    const result = evaluate(state, lines(metric(0, 2), metric(1, 1.9)), none, alive, 5000, context());
    expect(result.newPoints).toBe(2);
    expect(result.incidents).toEqual([]);
    expect(result.state.ticks).toBe(1);
    expect(result.state.firstTickAt).toBe(5000);
    expect(result.state.rolling.lastStep).toBe(1);
    expect(result.state.rolling.lastMetrics).toEqual({ loss: 1.9 });
  });

  it('re-arms once per new launch, and never for an evaluation on an older record of the run', () => {
    const state = warmUp(5);
    const nan = (step: number, at: number, launch: RunMeta) =>
      evaluate(state, lines(metric(step, 'NaN')), none, alive, at, context({ meta: launch })).incidents;
    expect(nan(5, 5000, meta)).toHaveLength(1);
    const relaunched = { ...meta, launchCount: 2, startedAt: new Date(0).toISOString() };
    // The NaN persists after the relaunch: a new episode, one alert.
    expect(nan(6, 6000, relaunched)).toHaveLength(1);
    // A woken evaluation still holding launch 1's record (cached), then one on the fresh record: no
    // flip-flop of the launch, so no alert from either while the NaN lasts.
    expect(nan(7, 7000, meta)).toHaveLength(0);
    expect(nan(8, 8000, relaunched)).toHaveLength(0);
    expect(state.launch).toBe(2);
  });

  it('raises one NaN incident per episode, with its wording, and none while it lasts', () => {
    const state = warmUp(5);
    const first = evaluate(state, lines(metric(5, 'NaN')), none, alive, 6000, context());
    expect(first.incidents).toHaveLength(1);
    const [incident] = first.incidents;
    expect(incident).toMatchObject({
      id: 'r1:nan#1',
      runId: 'r1',
      kind: 'nan',
      severity: 'critical',
      at: 6000,
      launch: 1,
      step: 5,
      title: 'qwen-gsm8k: non-finite metric at step 5',
      metrics: ['loss'],
    });
    expect(incident?.summary).toContain('loss became NaN at step 5');
    const again = evaluate(state, lines(metric(6, 'NaN')), none, alive, 7000, context());
    expect(again.incidents).toEqual([]);
  });

  it('counts malformed lines and notes them once', () => {
    const state = createMonitorState();
    const result = evaluate(state, lines('not json', metric(0, 1)), none, alive, 0, context());
    expect(result.newPoints).toBe(1);
    expect(result.malformed.count).toBe(1);
    expect(result.malformed.firstReason).toBeDefined();
    expect(result.malformed.note).toContain('not json');
  });

  it('raises a stall when an alive process makes no progress for stallS, and none when muted', () => {
    const stalled = warmUp(3);
    const quiet = evaluate(stalled, none, none, alive, 2000 + 60_000, context());
    expect(quiet.incidents).toEqual([]);
    expect(quiet.dumpStacks).toBe(false);
    // The first tick past the limit asks for the stacks and raises nothing.
    const asked = evaluate(stalled, none, none, alive, 2000 + 200_000, context());
    expect(asked.incidents).toEqual([]);
    expect(asked.dumpStacks).toBe(true);
    const late = evaluate(stalled, none, none, alive, 2000 + 205_000, context());
    expect(late.dumpStacks).toBe(false);
    expect(late.incidents.map((incident) => incident.kind)).toEqual(['stall']);
    expect(late.incidents[0]?.summary).toMatch(
      /no new step for .* \(last step 2\); the process is still alive\. No stack dump/,
    );

    const muted = warmUp(3);
    const policy: AlertPolicy = {
      rules: [],
      mutes: [{ detector: 'stall', by: { id: 'u', name: 'u' }, at: new Date(0).toISOString() }],
    };
    evaluate(muted, none, none, alive, 2000 + 199_000, context({ policy }));
    const silent = evaluate(muted, none, none, alive, 2000 + 200_000, context({ policy }));
    expect(silent.incidents).toEqual([]);
    // The episode still ran, so unmuting does not replay it.
    const unmuted = evaluate(muted, none, none, alive, 2000 + 201_000, context());
    expect(unmuted.incidents).toEqual([]);
  });

  it('puts the hang dump that arrived after the ask into the stall alert, and drops it when a step moves', () => {
    const state = warmUp(3);
    expect(evaluate(state, none, lines('old line'), alive, 2000 + 200_000, context()).dumpStacks).toBe(true);
    const dump = lines(
      'Thread 0x00007f3ab2b2b6c0 (most recent call first):',
      '  File "/w/train.py", line 9 in hold',
      '  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap',
      '',
      'Current thread 0x00007f3ab3890b80 (most recent call first):',
      '  File "/w/train.py", line 14 in all_reduce',
      '  File "/w/train.py", line 20 in train_step',
      '  File "/w/train.py", line 31 in <module>',
    );
    const alerted = evaluate(state, none, dump, alive, 2000 + 201_000, context());
    const incident = alerted.incidents[0];
    expect(incident?.summary).toContain(
      'Main thread stuck in: all_reduce (train.py:14) ← train_step (train.py:20) ← <module> (train.py:31)',
    );
    expect(incident?.stackDump).toContain('line 9 in hold');
    expect(incident?.stackDump).not.toContain('old line');
    // A step moves: the stall ends and the next one asks again.
    evaluate(state, lines(metric(3, 1.9)), none, alive, 2000 + 202_000, context());
    expect(state.stallDump).toBeUndefined();
    expect(evaluate(state, none, none, alive, 2000 + 400_000, context()).dumpStacks).toBe(true);
  });

  it('summarises a clean finish once, and explains a crash from the log tail the shell read', () => {
    const finished = warmUp(3);
    const exited: ProcessState = { kind: 'exited', exitCode: 0 };
    const done = evaluate(finished, none, none, exited, 10_000, context());
    expect(done.incidents.map((incident) => incident.title)).toEqual(['qwen-gsm8k finished']);
    expect(evaluate(finished, none, none, exited, 11_000, context()).incidents).toEqual([]);

    // A run Shepherd stopped (or is stopping) that exited 0 after the TERM: no summary, no crash.
    for (const ended of [
      { ...meta, status: 'stopped' as const },
      { ...meta, status: 'paused' as const },
      { ...meta, status: 'evaluating' as const, stopRequested: 'stop' as const },
    ]) {
      const stopped = evaluate(warmUp(3), none, none, exited, 10_000, context({ meta: ended }));
      expect(stopped.incidents, ended.status).toEqual([]);
    }

    const crashed = warmUp(3);
    const failed: ProcessState = { kind: 'exited', exitCode: 1 };
    expect(needsCrashLog(crashed, meta, failed, none, none)).toBe(true);
    expect(needsCrashLog(crashed, meta, failed, { more: true }, none)).toBe(false);
    const crashLogTail =
      'Traceback (most recent call last):\n  File "train.py", line 3\nRuntimeError: CUDA out of memory\n';
    const crash = evaluate(crashed, none, none, failed, 10_000, context({ crashLogTail }));
    expect(crash.incidents).toHaveLength(1);
    expect(crash.incidents[0]).toMatchObject({
      kind: 'crash',
      exitCode: 1,
      title: 'qwen-gsm8k failed',
      step: 2,
    });
    expect(crash.incidents[0]?.traceback).toContain('CUDA out of memory');
    expect(needsCrashLog(crashed, meta, failed, none, none)).toBe(false);
  });

  it('starts the windows over when metrics.jsonl was replaced, keeping the episodes', () => {
    const state = warmUp(5);
    evaluate(state, lines(metric(5, 'NaN')), none, alive, 6000, context());
    const result = evaluate(
      state,
      { lines: [metric(0, 3)], reset: true, more: false },
      none,
      alive,
      7000,
      context(),
    );
    expect(result.metricsReset).toBe(true);
    expect(result.state.rolling.points).toBe(1);
    expect(result.state.rolling.lastStep).toBe(0);
    expect(Object.keys(result.state.episodes)).toContain('nan');
  });
});
