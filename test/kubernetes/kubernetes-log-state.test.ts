import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogLease } from '../../src/runs/kubernetes/kubernetes-log-state.js';

/*
 * The log lease and its redo record, on real files: a follower killed in the middle of a batch leaves the
 * batch announced; whoever takes the lease next completes it byte for byte and takes its cursor.
 */

let runDir: string;
let now = 1_000_000;

beforeEach(async () => {
  runDir = await mkdtemp(path.join(tmpdir(), 'k8s-lease-'));
  now = 1_000_000;
});

afterEach(async () => {
  await rm(runDir, { recursive: true, force: true });
});

const lease = (holder: string) =>
  createLogLease({ runDir, holder, leaseMs: 10_000, now: () => now, confirmMs: 1 });

const read = (file: string) => readFile(path.join(runDir, file), 'utf8').catch(() => '');
const cursor = { podUid: 'pod-1', since: '2024-06-01T12:00:00.5Z', sameCount: 2 };
const covers = { launchKey: 'job#1', header: '=== launch 1 ===', cursor };

describe('the log lease', () => {
  it('writes the header once per launch, the lines, the metrics, and moves the cursor', async () => {
    const first = lease('a');
    expect(await first.acquire()).toBe(true);
    expect(await first.append(['one', 'two'], covers, ['{"step": 1, "loss": 0.5}'])).toBe(true);
    expect(await first.append(['three'], { ...covers, cursor: { ...cursor, sameCount: 3 } })).toBe(true);
    expect(await read('output.log')).toBe('=== launch 1 ===\none\ntwo\nthree\n');
    expect(await read('metrics.jsonl')).toBe('{"step": 1, "loss": 0.5}\n');
    expect((await first.held())?.cursor).toEqual({ ...cursor, sameCount: 3 });
  });

  it('is not taken while its holder renews it, and is taken once it went stale', async () => {
    const first = lease('a');
    const second = lease('b');
    expect(await first.acquire()).toBe(true);
    now += 9_000;
    expect(await first.renew()).toBe(true);
    now += 9_000;
    expect(await second.acquire()).toBe(false);
    now += 2_000;
    expect(await second.acquire()).toBe(true);
    // The old holder finds out at its next write, and writes nothing.
    expect(await first.append(['late'], covers)).toBe(false);
    expect(await first.renew()).toBe(false);
    expect(await read('output.log')).toBe('');
  });

  it("completes a dead holder's half-written batch exactly, and takes its cursor", async () => {
    const first = lease('a');
    expect(await first.acquire()).toBe(true);
    expect(await first.append(['before'], { ...covers, cursor: { ...cursor, sameCount: 1 } })).toBe(true);
    const fromBytes = (await read('output.log')).length;
    const batch = 'four\nfive\n';
    const metrics = '{"step": 5, "loss": NaN}\n';
    // What a holder killed mid-batch leaves: the batch announced, output.log written in part, metrics not.
    const state = JSON.parse(await read('kubernetes-log.json')) as Record<string, unknown>;
    const pending = {
      writes: [
        { file: 'output.log', fromBytes, text: batch },
        { file: 'metrics.jsonl', fromBytes: 0, text: metrics },
      ],
      launchKey: 'job#1',
      cursor: { ...cursor, sameCount: 9 },
    };
    await writeFile(path.join(runDir, 'kubernetes-log.json'), JSON.stringify({ ...state, pending }));
    await writeFile(path.join(runDir, 'output.log'), `${await read('output.log')}fou`);
    now += 20_000;
    const second = lease('b');
    expect(await second.acquire()).toBe(true);
    expect(await read('output.log')).toBe('=== launch 1 ===\nbefore\nfour\nfive\n');
    expect(await read('metrics.jsonl')).toBe(metrics);
    const taken = await second.held();
    expect(taken?.cursor).toEqual({ ...cursor, sameCount: 9 });
    expect(taken?.pending).toBeUndefined();
  });

  it('records the ending of a launch with its line, and releases', async () => {
    const first = lease('a');
    expect(await first.acquire()).toBe(true);
    expect(
      await first.append(['[shepherd] Kubernetes: ImagePullBackOff'], {
        launchKey: 'job#2',
        header: '=== launch 2 ===',
        ended: 'job#2',
      }),
    ).toBe(true);
    expect((await first.held())?.ended).toBe('job#2');
    await first.release();
    expect(await first.held()).toBeUndefined();
    expect(await lease('b').acquire()).toBe(true);
    expect(await read('output.log')).toBe('=== launch 2 ===\n[shepherd] Kubernetes: ImagePullBackOff\n');
  });
});
