import { type ChildProcess, spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { type KubernetesEmulator, startKubernetesEmulator } from '../emulators/kubernetes-api-server.js';
import {
  makeRun,
  makeRunsDir,
  newExecutor,
  REPOSITORY,
  rbacAuthorizer,
  readLog,
  readMetrics,
  waitFor,
  waitForState,
} from './kubernetes-harness.js';

/*
 * A bot killed with SIGKILL while it streams a pod's log (its lease left behind, maybe an append half
 * done): a new bot process on the same run directory takes the follow over once the lease is stale, and
 * output.log ends up with every line exactly once.
 */

let emulator: KubernetesEmulator;
let runsDir: string;
let child: ChildProcess | undefined;

beforeAll(async () => {
  runsDir = await makeRunsDir();
  emulator = await startKubernetesEmulator({ authorize: await rbacAuthorizer() });
});

afterAll(async () => {
  if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await emulator?.close();
  await rm(runsDir, { recursive: true, force: true });
});

function stepLines(log: string): number[] {
  return [...log.matchAll(/^step=(\d+) /gm)].map((match) => Number(match[1]));
}

it('a bot killed mid-stream is replaced by a new one without a duplicated or lost line', async () => {
  const meta = await makeRun(runsDir, { args: ['--steps', '80', '--sleep', '0.03'] });
  const bot = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'test/kubernetes/fixtures/follow-run.ts',
      emulator.kubeConfigText(),
      runsDir,
      JSON.stringify(meta),
    ],
    { cwd: REPOSITORY, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  child = bot;
  let output = '';
  bot.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  const { jobId } = await waitFor(
    () => {
      const line = output.split('\n')[0];
      return line === undefined || line === ''
        ? undefined
        : z.object({ jobId: z.string() }).parse(JSON.parse(line));
    },
    'the first bot to launch the run',
    60_000,
  );
  await waitFor(
    async () => stepLines(await readLog(runsDir, meta.id)).length >= 20,
    'twenty lines from the first bot',
  );
  const exited = new Promise((resolve) => bot.once('exit', resolve));
  bot.kill('SIGKILL');
  await exited;
  const before = stepLines(await readLog(runsDir, meta.id)).length;
  expect(before).toBeLessThan(80);

  const second = newExecutor(emulator, runsDir);
  const launched = { ...meta, jobId };
  expect(
    await waitForState(second, launched, (state) => state.kind === 'exited', 'the run to end', 60_000),
  ).toEqual({
    kind: 'exited',
    exitCode: 0,
  });
  const log = await readLog(runsDir, meta.id);
  expect(stepLines(log)).toEqual(Array.from({ length: 80 }, (_, index) => index + 1));
  expect((await readMetrics(runsDir, meta.id)).map((point) => point.step)).toEqual(
    Array.from({ length: 80 }, (_, index) => index + 1),
  );
  expect(log.match(/^=== launch 1 /gm)).toHaveLength(1);
  await second.close();
});
