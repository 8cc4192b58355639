import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { parseMetricLine, readLastMetrics, tailLines } from '../../src/runs/file-tail.js';
import { createRunStore, type RunStore, slugifyRunName } from '../../src/runs/records/run-store.js';
import { ALICE } from './harness.js';

let dataDir: string;
let store: RunStore;
const now = new Date('2026-11-30T10:00:00Z');
const input = {
  script: 'print("v1")\n',
  threadId: 'web:local:t',
  requester: ALICE,
  gpus: 1,
  maxHours: 2,
  executor: 'local' as const,
};

beforeEach(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'shepherd-store-'));
  store = createRunStore({ dataDir, logger: createLogger('silent') });
});
afterEach(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

describe('run store', () => {
  it('creates readable ids, slugified unique names, and finds runs by id or name', async () => {
    const first = await store.createRun({ ...input, name: 'Qwen 2.5 / GSM8K SFT' }, now);
    const second = await store.createRun({ ...input, name: 'qwen-2.5-gsm8k-sft' }, now);
    expect(first.id).toMatch(/^r-1130-[0-9a-f]{4}$/);
    expect(first.name).toBe('qwen-2.5-gsm8k-sft');
    expect(second.name).toBe('qwen-2.5-gsm8k-sft-2');
    expect((await store.findRun(first.id)).name).toBe(first.name);
    expect((await store.findRun('qwen-2.5-gsm8k-sft-2')).id).toBe(second.id);
    expect((await store.findRun('Qwen 2.5 / GSM8K SFT')).id).toBe(first.id);
    await expect(store.findRun('nothing')).rejects.toMatchObject({ code: 'run_not_found' });
    await expect(store.findRun('nothing')).rejects.toThrow(
      /^no run named nothing; runs: qwen-2\.5-gsm8k-sft/,
    );
    await expect(store.findRun('../etc')).rejects.toMatchObject({ code: 'run_not_found' });
    expect((await store.listRuns()).map((meta) => meta.id).sort()).toEqual([first.id, second.id].sort());
    expect(await readFile(path.join(store.runDir(first.id), 'train.py'), 'utf8')).toBe(input.script);
  });

  it('slugifies names and never returns an empty or id-like name', async () => {
    expect(slugifyRunName('  Hello, World!! ')).toBe('hello-world');
    expect(slugifyRunName('***')).toBe('run');
    const idLike = await store.createRun({ ...input, name: 'r-1130-abcd' }, now);
    expect(idLike.name).toBe('run-r-1130-abcd');
  });

  it('writes meta atomically and rejects an invalid meta.json', async () => {
    const meta = await store.createRun({ ...input, name: 'atomic' }, now);
    await store.writeMeta({ ...meta, lastStep: 7 });
    expect((await store.readMeta(meta.id)).lastStep).toBe(7);
    expect((await readdir(store.runDir(meta.id))).filter((file) => file.endsWith('.tmp'))).toEqual([]);
    await writeFile(path.join(store.runDir(meta.id), 'meta.json'), '{"id": "x", "status": "flying"}');
    await expect(store.readMeta(meta.id)).rejects.toMatchObject({ code: 'run_meta_invalid' });
    // A broken run directory does not hide the others.
    const other = await store.createRun({ ...input, name: 'other' }, now);
    expect((await store.listRuns()).map((run) => run.id)).toEqual([other.id]);
  });

  it('archives each script version and returns a unified diff', async () => {
    const meta = await store.createRun({ ...input, name: 'scripted' }, now);
    const one = await store.updateScript(meta.id, 'print("v2")\n', now);
    const two = await store.updateScript(meta.id, 'print("v3")\n', now);
    expect(one.archivedAs).toBe('train_v1.py');
    expect(two.archivedAs).toBe('train_v2.py');
    expect(two.meta.scriptVersion).toBe(3);
    expect(two.diff).toContain('-print("v2")\n+print("v3")');
    expect(await store.readScript(meta.id, 1)).toBe('print("v1")\n');
    expect(await store.readScript(meta.id, 2)).toBe('print("v2")\n');
    expect(await store.readScript(meta.id)).toBe('print("v3")\n');
    await expect(store.readScript(meta.id, 9)).rejects.toMatchObject({ code: 'script_not_found' });
  });
});

describe('reading run files from the end', () => {
  it('parses Python json lines with NaN and infinities, and skips malformed lines', () => {
    expect(parseMetricLine('{"ts": 1.5, "step": 3, "loss": NaN, "gn": Infinity, "x": -Infinity}')).toEqual({
      ts: 1.5,
      step: 3,
      values: { loss: Number.NaN, gn: Number.POSITIVE_INFINITY, x: Number.NEGATIVE_INFINITY },
    });
    expect(parseMetricLine('{"step": 1, "loss": 0.5')).toBeUndefined();
    expect(parseMetricLine('[1,2]')).toBeUndefined();
    expect(parseMetricLine('')).toBeUndefined();
  });

  it('tails a large file without reading all of it', async () => {
    const file = path.join(dataDir, 'metrics.jsonl');
    const lines = Array.from({ length: 50_000 }, (_, step) =>
      JSON.stringify({ ts: step, step, loss: 1 / (step + 1) }),
    );
    await writeFile(file, `${lines.join('\n')}\n{"step": 50000, "loss": NaN}\n{"broken`);
    const last = await readLastMetrics(file, 2);
    expect(last.map((record) => record.step)).toEqual([49_999, 50_000]);
    expect(last[1]?.values.loss).toBeNaN();
    expect(await tailLines(file, 2)).toEqual(['{"step": 50000, "loss": NaN}', '{"broken']);
    expect(await tailLines(path.join(dataDir, 'missing.log'), 5)).toEqual([]);
  });
});
