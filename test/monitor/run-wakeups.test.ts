import { spawn } from 'node:child_process';
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  watch,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createRunWakeups, type DirectoryWatch, type WakeOutcome } from '../../src/monitor/run-wakeups.js';
import { ALL_WOKEN_FILES, WOKEN_FILE_BITS, type WokenFiles } from '../../src/monitor/woken-files.js';

const logger = pino({ level: 'silent' });
const root = mkdtempSync(join(tmpdir(), 'shepherd-wakeups-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function runDirectory(name: string): string {
  const directory = join(root, name);
  mkdirSync(directory, { recursive: true });
  return directory;
}

/** Inotify watches this process holds, read from the kernel (`/proc/self/fdinfo`, one `inotify wd:` line each). */
function inotifyWatches(): number {
  let count = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    let target = '';
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue;
    }
    if (target !== 'anon_inode:inotify') continue;
    const info = readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8');
    count += info.split('\n').filter((line) => line.startsWith('inotify wd:')).length;
  }
  return count;
}

describe('run wake-ups', () => {
  it('wakes within a moment of a new line, and evaluates a run printing 10,000 lines a second at most twice a second', async () => {
    const directory = runDirectory('chatty');
    const starts: number[] = [];
    const wakeups = createRunWakeups({
      evaluate: async () => {
        starts.push(Date.now());
        return 'done';
      },
      maxEvalsPerS: 2,
      logger,
    });
    wakeups.follow('chatty', directory);
    const firstLineAt = Date.now();
    appendFileSync(join(directory, 'output.log'), 'step 1\n');
    await vi.waitFor(() => expect(starts.length).toBe(1), { timeout: 5_000, interval: 10 });
    expect((starts[0] ?? 0) - firstLineAt).toBeLessThan(1_000);

    // A real process writing 10,000 lines a second for 3 s.
    const writer = spawn('/usr/bin/python3', [
      '-c',
      `import time, sys
out = open(sys.argv[1], "a", buffering=1)
end = time.time() + 3
n = 0
while time.time() < end:
    for _ in range(10):
        out.write(f"step {n} loss 1.0\\n"); n += 1
    time.sleep(0.001)
print(n)`,
      join(directory, 'output.log'),
    ]);
    let printed = '';
    writer.stdout.on('data', (chunk: Buffer) => {
      printed += chunk.toString();
    });
    const exitCode = await new Promise<number | null>((resolve) => writer.on('close', resolve));
    expect(exitCode).toBe(0);
    expect(Number(printed.trim())).toBeGreaterThan(5_000);
    const lastLineAt = Date.now();
    // The last lines are evaluated too: one evaluation starts after the writer stopped (within one gap).
    await vi.waitFor(() => expect(starts.at(-1) ?? 0).toBeGreaterThanOrEqual(lastLineAt - 600), {
      timeout: 5_000,
      interval: 20,
    });
    await wakeups.close();
    const during = starts.slice(1);
    // 3 s of writing plus the trailing one: at most 2 a second.
    expect(during.length).toBeGreaterThanOrEqual(3);
    expect(during.length).toBeLessThanOrEqual(9);
    for (let index = 1; index < starts.length; index++) {
      expect((starts[index] ?? 0) - (starts[index - 1] ?? 0)).toBeGreaterThanOrEqual(495);
    }
  });

  it('a change during an evaluation triggers exactly one more, and a taken lease is tried again', async () => {
    const directory = runDirectory('busy');
    let calls = 0;
    let release: (() => void) | undefined;
    const outcomes: WakeOutcome[] = ['locked', 'done', 'done'];
    const wakeups = createRunWakeups({
      evaluate: async () => {
        calls += 1;
        if (calls === 2) await new Promise<void>((resolve) => (release = resolve));
        return outcomes[calls - 1] ?? 'done';
      },
      maxEvalsPerS: 20,
      logger,
    });
    wakeups.follow('busy', directory);
    appendFileSync(join(directory, 'metrics.jsonl'), '{"step": 1, "loss": 1}\n');
    // First evaluation finds the lease taken; the retry (call 2) runs and blocks.
    await vi.waitFor(() => expect(release).toBeDefined(), { timeout: 5_000, interval: 10 });
    for (let step = 2; step < 7; step++) {
      appendFileSync(join(directory, 'metrics.jsonl'), `{"step": ${step}, "loss": 1}\n`);
    }
    // Unrelated files do not wake the run.
    appendFileSync(join(directory, 'notes.txt'), 'hello\n');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(calls).toBe(2);
    release?.();
    await vi.waitFor(() => expect(calls).toBe(3), { timeout: 5_000, interval: 10 });
    // Exactly one more: nothing changed since, so nothing else runs.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(calls).toBe(3);
    await wakeups.close();
  });

  it('releases every watch: none left in the kernel after 500 runs', () => {
    const before = inotifyWatches();
    let open = 0;
    const counting: DirectoryWatch = (directory, onChange) => {
      const watcher = watch(directory, { persistent: false }, (_event, name) => onChange(name ?? undefined));
      open += 1;
      return {
        close() {
          open -= 1;
          watcher.close();
        },
      };
    };
    const wakeups = createRunWakeups({
      evaluate: async () => 'done',
      maxEvalsPerS: 2,
      logger,
      watchDirectory: counting,
    });
    for (let index = 0; index < 500; index++) {
      wakeups.follow(`run-${index}`, runDirectory(`many/run-${index}`));
      wakeups.follow(`run-${index}`, runDirectory(`many/run-${index}`));
    }
    expect(wakeups.size()).toBe(500);
    expect(open).toBe(500);
    expect(inotifyWatches() - before).toBe(500);
    for (let index = 0; index < 500; index++) wakeups.release(`run-${index}`);
    expect(wakeups.size()).toBe(0);
    expect(open).toBe(0);
    expect(inotifyWatches()).toBe(before);
  });

  it('close waits for an evaluation under way (a cut-off one would keep the run lease after Redis closes)', async () => {
    const directory = runDirectory('closing');
    let release: (() => void) | undefined;
    let finished = false;
    const wakeups = createRunWakeups({
      evaluate: async () => {
        await new Promise<void>((resolve) => (release = resolve));
        finished = true;
        return 'done';
      },
      maxEvalsPerS: 2,
      logger,
    });
    wakeups.follow('closing', directory);
    appendFileSync(join(directory, 'output.log'), 'step 1\n');
    await vi.waitFor(() => expect(release).toBeDefined(), { timeout: 5_000, interval: 10 });
    let closed = false;
    const closing = wakeups.close().then(() => {
      closed = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(closed).toBe(false);
    release?.();
    await closing;
    expect(finished).toBe(true);
    expect(wakeups.size()).toBe(0);
  });

  it('runs due on one grid step share a timer: each is evaluated once, and one let go leaves the others', async () => {
    const changes = new Map<string, (fileName: string | undefined) => void>();
    const watchDirectory: DirectoryWatch = (directory, onChange) => {
      changes.set(directory, onChange);
      return { close: () => changes.delete(directory) };
    };
    const evaluated: string[] = [];
    const wakeups = createRunWakeups({
      evaluate: async (runId) => {
        evaluated.push(runId);
        return 'done';
      },
      maxEvalsPerS: 2,
      logger,
      watchDirectory,
    });
    const runIds = Array.from({ length: 20 }, (_, index) => `slot-${index}`);
    for (const runId of runIds) wakeups.follow(runId, `/runs/${runId}`);
    const arming = vi.spyOn(globalThis, 'setTimeout');
    // Every run wakes within a millisecond or two, each of them several times.
    for (const runId of runIds)
      for (let change = 0; change < 3; change++) changes.get(`/runs/${runId}`)?.('metrics.jsonl');
    // One timer for the grid step (two when the step ended meanwhile), not one per run or per change.
    expect(arming.mock.calls.length).toBeGreaterThan(0);
    expect(arming.mock.calls.length).toBeLessThanOrEqual(2);
    arming.mockRestore();
    wakeups.release('slot-3');
    await vi.waitFor(() => expect(evaluated.length).toBe(19), { timeout: 5_000, interval: 10 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect([...evaluated].sort()).toEqual(runIds.filter((runId) => runId !== 'slot-3').sort());
    // Letting go of every run of a slot takes its timer away too: nothing is evaluated after.
    const clearing = vi.spyOn(globalThis, 'clearTimeout');
    for (const runId of runIds) changes.get(`/runs/${runId}`)?.('metrics.jsonl');
    for (const runId of runIds) wakeups.release(runId);
    expect(clearing.mock.calls.length).toBeGreaterThan(0);
    clearing.mockRestore();
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(evaluated.length).toBe(19);
    await wakeups.close();
  });

  it('with 0 evaluations a second it watches nothing (timer only)', () => {
    const wakeups = createRunWakeups({ evaluate: async () => 'done', maxEvalsPerS: 0, logger });
    wakeups.follow('quiet', runDirectory('quiet'));
    expect(wakeups.size()).toBe(0);
  });

  it('tells each evaluation which files changed: a script alert wakes the run, other files do not', async () => {
    let change: ((fileName: string | undefined) => void) | undefined;
    const watchDirectory: DirectoryWatch = (_directory, onChange) => {
      change = onChange;
      return { close: () => undefined };
    };
    const seen: WokenFiles[] = [];
    let release: (() => void) | undefined;
    const wakeups = createRunWakeups({
      evaluate: async (_runId, files) => {
        seen.push(files);
        if (seen.length === 2) await new Promise<void>((resolve) => (release = resolve));
        return 'done';
      },
      maxEvalsPerS: 50,
      logger,
      watchDirectory,
    });
    wakeups.follow('named', '/runs/named');
    change?.('checkpoints.jsonl');
    change?.('train.py');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(seen).toEqual([]);
    change?.('alerts.jsonl');
    change?.('output.log');
    await vi.waitFor(() => expect(seen).toEqual([WOKEN_FILE_BITS.alerts | WOKEN_FILE_BITS.log]), {
      timeout: 5_000,
      interval: 10,
    });
    // A watch that names no file reads them all.
    change?.(undefined);
    await vi.waitFor(() => expect(release).toBeDefined(), { timeout: 5_000, interval: 10 });
    expect(seen[1]).toBe(ALL_WOKEN_FILES);
    // What changes during an evaluation is handed to the one that follows it.
    change?.('metrics.jsonl');
    release?.();
    await vi.waitFor(() => expect(seen).toHaveLength(3), { timeout: 5_000, interval: 10 });
    expect(seen[2]).toBe(WOKEN_FILE_BITS.metrics);
    await wakeups.close();
  });
});
