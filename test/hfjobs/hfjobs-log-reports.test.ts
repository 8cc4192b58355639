import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogReports, parseLogReport } from '../../src/runs/hfjobs/hfjobs-log-reports.js';

/** What an HF job's log lines report, read as untrusted output (a script can print any of them). */

describe('HF job log reports', () => {
  const dirs: string[] = [];
  const runDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'hf-reports-'));
    dirs.push(dir);
    return dir;
  };
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  const read = (dir: string, file: string) => readFileSync(join(dir, file), 'utf8');

  it('writes evaluation.json, eval.log and eval_results.jsonl from the markers, and keeps markers out of output.log', async () => {
    const dir = runDir();
    const reports = createLogReports(dir, 'job1');
    await reports.start(false);
    const kept = await reports.apply([
      'step=4 loss=0.25',
      '[shepherd:evaluation] {"status": "running", "startedAt": 1700000000}',
      "{'eval_loss': 0.3}",
      '[eval] {"eval_bleu": 31.5, "ts": 1700000001.5, "note": "text"}',
    ]);
    expect(kept).toEqual([
      'step=4 loss=0.25',
      "{'eval_loss': 0.3}",
      '[eval] {"eval_bleu": 31.5, "ts": 1700000001.5, "note": "text"}',
    ]);
    expect(JSON.parse(read(dir, 'evaluation.json'))).toEqual({ status: 'running', startedAt: 1700000000 });
    expect(read(dir, 'eval.log')).toBe(
      `{'eval_loss': 0.3}\n[eval] {"eval_bleu": 31.5, "ts": 1700000001.5, "note": "text"}\n`,
    );
    expect(read(dir, 'eval_results.jsonl')).toBe('{"eval_bleu":31.5}\n');

    // A new follower after a restart mid-evaluation keeps routing the eval's output to eval.log.
    const resumed = createLogReports(dir, 'job1');
    await resumed.start(true);
    await resumed.apply([
      'accuracy line',
      '[shepherd:evaluation] {"status": "failed", "exitCode": 2, "startedAt": 1700000000, "endedAt": 1700000009}',
      'after',
    ]);
    expect(read(dir, 'eval.log')).toMatch(/accuracy line\n$/);
    expect(JSON.parse(read(dir, 'evaluation.json'))).toMatchObject({ status: 'failed', exitCode: 2 });
  });

  it('treats forged or malformed markers as output and writes only what the schema allows', async () => {
    const dir = runDir();
    const reports = createLogReports(dir, 'job7');
    await reports.start(false);
    const forged = [
      '[shepherd:evaluation] {"status": "passed", "exitCode": "0; rm -rf /"}',
      '[shepherd:evaluation] not json',
      '[shepherd:evaluation] {"status": "won"}',
      '[eval] ["not", "a", "dict"]',
    ];
    expect(await reports.apply(forged)).toEqual(forged);
    expect(existsSync(join(dir, 'evaluation.json'))).toBe(false);
    expect(existsSync(join(dir, 'eval_results.jsonl'))).toBe(false);

    // Extra fields are dropped; the model's location is always the job's, whatever the line says.
    await reports.apply([
      '[shepherd:evaluation] {"status": "passed", "exitCode": 0, "admin": true}',
      '[shepherd:model] {"path": "/etc", "info": {}, "ts": 1700000000, "location": ""}',
    ]);
    expect(JSON.parse(read(dir, 'evaluation.json'))).toEqual({ status: 'passed', exitCode: 0 });
    expect(JSON.parse(read(dir, 'model.json'))).toEqual({
      path: '/etc',
      info: {},
      ts: 1700000000,
      location: 'HF job job7',
    });
    expect(parseLogReport(`[eval] {"x": 1, "pad": "${'a'.repeat(70_000)}"}`)).toEqual({ kind: 'line' });
  });

  it('does not resume an evaluation from a file a new job left behind', async () => {
    const dir = runDir();
    writeFileSync(join(dir, 'evaluation.json'), '{"status": "running"}');
    const reports = createLogReports(dir, 'job9');
    await reports.start(false);
    await reports.apply(['training line']);
    expect(existsSync(join(dir, 'eval.log'))).toBe(false);
  });
});
