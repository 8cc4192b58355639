#!/usr/bin/env -S npx tsx
// `npm test`: the two Vitest projects in two processes at once. Vitest runs a project that allows one worker
// (the Slurm files share one cluster and its two GPUs) as a group of its own after every other group, so in one
// process the Slurm files ran alone on an idle pool at the end. They mostly wait on Slurm, so they now run
// beside the main project. The main project streams its output; the Slurm project's output is kept and
// printed when it ends, so the two never interleave. Extra arguments (file filters, -t) go to both.
// Usage: npx tsx scripts/run-tests.ts [vitest args…]
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const extraArguments = process.argv.slice(2);
const vitest = join('node_modules', 'vitest', 'vitest.mjs');
const outputDirectory = mkdtempSync(join(tmpdir(), 'shepherd-tests-'));
const slurmOutput = join(outputDirectory, 'slurm.log');

const children = new Set<ReturnType<typeof spawn>>();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    for (const child of children) child.kill(signal);
  });
}

function runProject(project: string, output: 'inherit' | string): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [vitest, 'run', '--project', project, '--passWithNoTests', ...extraArguments],
      { stdio: output === 'inherit' ? 'inherit' : ['ignore', 'pipe', 'pipe'] },
    );
    children.add(child);
    if (output !== 'inherit') {
      const file = createWriteStream(output);
      child.stdout?.pipe(file);
      child.stderr?.pipe(file);
    }
    child.on('error', (error) => {
      process.stderr.write(`run-tests: could not start vitest for ${project}: ${error.message}\n`);
      resolve(1);
    });
    child.on('close', (code, signal) => resolve(code ?? (signal === null ? 1 : 128)));
  });
}

const slurm = runProject('slurm', slurmOutput);
const mainCode = await runProject('main', 'inherit');
const slurmCode = await slurm;
process.stdout.write(`\n──── project slurm (ran beside main) ────\n${readFileSync(slurmOutput, 'utf8')}`);
rmSync(outputDirectory, { recursive: true, force: true });
process.stdout.write(`\nrun-tests: main exited ${mainCode}, slurm exited ${slurmCode}\n`);
process.exit(mainCode !== 0 ? mainCode : slurmCode);
