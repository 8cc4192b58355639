/**
 * Runs every benchmark in bench/ (except this file and bench/lib), one after another, each in its own
 * process, and prints their `name=value` lines. A benchmark that fails or times out prints
 * `<bench>_error=<reason>` (e.g. `spine_ack_error=exit code 1`) and the run continues.
 * Run: npm run bench   (or: npx tsx bench/run-all.ts [name-filter])
 * Env: BENCH_TIMEOUT_S per benchmark (default 600).
 */
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const benchDirectory = fileURLToPath(new URL('.', import.meta.url));
const root = join(benchDirectory, '..');
const timeoutMs = Number(process.env.BENCH_TIMEOUT_S ?? '600') * 1000;
const filter = process.argv[2];
const self = basename(fileURLToPath(import.meta.url));
const metricLine = /^[A-Za-z0-9_.-]+=\S.*$/;

const benches = readdirSync(benchDirectory)
  .filter((file) => file.endsWith('.ts') && file !== self && !file.endsWith('.d.ts'))
  .filter((file) => filter === undefined || file.includes(filter))
  .sort();

/** Runs one benchmark; resolves with its `name=value` lines and, when it failed, why. */
function runBench(file: string): Promise<{ lines: string[]; failure?: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join('bench', file)], {
      cwd: root,
      env: process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    let pending = '';
    let stderrTail = '';
    child.stdout.on('data', (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      const parts = pending.split('\n');
      pending = parts.pop() ?? '';
      for (const line of parts) {
        if (!metricLine.test(line.trim())) continue;
        lines.push(line.trim());
        process.stdout.write(`${line.trim()}\n`);
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderrTail = (stderrTail + chunk.toString('utf8')).slice(-2000);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (metricLine.test(pending.trim())) {
        lines.push(pending.trim());
        process.stdout.write(`${pending.trim()}\n`);
      }
      if (code === 0) {
        resolve({ lines });
        return;
      }
      const lastError = stderrTail
        .split('\n')
        .map((line) => line.trim())
        .filter((line) => /error/i.test(line))
        .pop();
      const reason =
        signal === null ? `exit code ${code}` : `killed by ${signal} (timeout ${timeoutMs / 1000} s?)`;
      process.stderr.write(`# ${file} failed (${reason}):\n${stderrTail}\n`);
      resolve({ lines, failure: lastError === undefined ? reason : `${reason}: ${lastError}` });
    });
  });
}

let failures = 0;
for (const file of benches) {
  process.stderr.write(`# running bench/${file}\n`);
  const startedAt = Date.now();
  const result = await runBench(file);
  process.stderr.write(`# bench/${file} took ${((Date.now() - startedAt) / 1000).toFixed(1)} s\n`);
  if (result.failure !== undefined) {
    failures += 1;
    const name = file.replace(/\.ts$/, '').replace(/[^A-Za-z0-9]+/g, '_');
    process.stdout.write(`${name}_error=${result.failure.replace(/\s+/g, ' ').slice(0, 300)}\n`);
  }
}
process.stderr.write(`# ${benches.length} benchmarks, ${failures} failed\n`);
