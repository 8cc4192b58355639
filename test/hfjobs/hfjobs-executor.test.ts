import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { runJob } from '@huggingface/hub';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunError } from '../../src/errors.js';
import { PYTHON_RUNTIME_DIR } from '../../src/runs/records/run-files.js';
import { type HfJobsEmulator, startHfJobsEmulator } from '../emulators/hf-jobs-server.js';
import { removeTree } from '../helpers/processes.js';
import { testRunMeta } from '../helpers/run-meta.js';
import {
  countLines,
  decodeJobPayload,
  emulatorExecutor,
  isOver,
  makeRun,
  makeRunsDir,
  readOutput,
  waitFor,
  waitForState,
} from './hfjobs-harness.js';

/*
 * The HF Jobs executor against the emulator (test/emulators/hf-jobs-server.ts): real HTTP through
 * @huggingface/hub, and each job's command run as a real python3 process whose output becomes the log.
 */

const NAN_SCRIPT = `import json, time
import shepherd
print("config " + json.dumps(shepherd.config(), sort_keys=True), flush=True)
for step in range(1, 7):
    loss = float("nan") if step == 5 else round(1.0 / step, 4)
    print(f"step={step} loss={loss}", flush=True)
    shepherd.log_metrics(step=step, loss=loss)
    time.sleep(0.05)
`;

const FOREVER_SCRIPT = `import time
import shepherd
shepherd.on_stop(lambda: print("saving checkpoint at stop", flush=True))
tick = 0
while True:
    tick += 1
    print(f"tick {tick}", flush=True)
    time.sleep(0.1)
`;

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('HF Jobs executor against the emulator', () => {
  let emulator: HfJobsEmulator;
  let runsDir: string;

  beforeAll(async () => {
    emulator = await startHfJobsEmulator({ schedulingMs: 700, keepAliveMs: 200 });
    runsDir = await makeRunsDir();
  });

  afterAll(async () => {
    await emulator.close();
    removeTree(runsDir);
  });

  it('launches a job with the image, the flavour for --gpus, timeoutSeconds and the script, and follows it to the end', async () => {
    const executor = emulatorExecutor(emulator, runsDir);
    const { meta, runDir } = await makeRun(runsDir, 'nan-run', NAN_SCRIPT, {
      gpus: 1,
      maxHours: 2,
      config: { lr: 0.001 },
      image: 'python:3.12',
    });
    const result = await executor.launch({ meta, runDir, gpuIndices: [] });
    const launched = { ...meta, ...result };
    const job = emulator.job(result.jobId ?? '');
    expect(job).toMatchObject({ dockerImage: 'python:3.12', flavor: 'a10g-small', timeoutSeconds: 7200 });
    expect(job?.labels).toEqual({ 'managed-by': 'shepherd', 'shepherd-run': 'nan-run' });
    expect(job?.command?.slice(0, 3)).toEqual(['python3', '-u', '-c']);
    const payload = decodeJobPayload(job?.command ?? []);
    expect(payload.files['train.py']).toBe(NAN_SCRIPT);
    expect(payload.files['.shepherd/shepherd.py']).toBe(
      await readFile(path.join(PYTHON_RUNTIME_DIR, 'shepherd.py'), 'utf8'),
    );
    expect(Object.keys(payload.files)).toContain('.shepherd/shepherd/integrations/hf.py');
    expect(job?.environment).toMatchObject({
      SHEPHERD_RUN_ID: 'nan-run',
      SHEPHERD_RUN_CONFIG: '{"lr":0.001}',
    });
    // The bot's token reaches the Hub as the bearer only, never the job.
    const created = emulator.requests.find(
      (request) => request.method === 'POST' && request.body !== undefined,
    );
    expect(created?.authorization).toBe(`Bearer ${emulator.token}`);
    expect(JSON.stringify(created?.body)).not.toContain(emulator.token);
    expect(job?.secrets).toEqual([]);

    // A new job starts as SCHEDULING.
    expect((await executor.poll([launched])).get(meta.id)).toEqual({
      kind: 'pending',
      reason: 'HF Jobs is scheduling the job on a10g-small',
    });
    await waitForState(executor, launched, (state) => state.kind === 'alive', 'the job to run');
    const final = await waitForState(executor, launched, isOver, 'the job to end');
    expect(final).toEqual({ kind: 'exited', exitCode: 0 });

    // Reported ended only once its log is in output.log: the real process's lines, NaN included.
    const output = await readOutput(runDir);
    expect(output).toMatch(
      /^=== launch 1 at .* \(script v1, hf job [0-9a-f]{24} in shepherd-test, a10g-small, image python:3\.12\) ===$/m,
    );
    expect(output).toContain('config {"lr": 0.001}');
    expect(countLines(output, 'step=5 loss=nan')).toBe(1);
    expect(countLines(output, 'step=6 loss=0.1667')).toBe(1);
    expect(output).toMatch(/^\[metrics\] \{"ts": [\d.]+, "step": 5, "loss": NaN\}$/m);
    await executor.close();
  });

  it('reports a failing job as exited with its code and the Hub message', async () => {
    const executor = emulatorExecutor(emulator, runsDir);
    const { meta, runDir } = await makeRun(
      runsDir,
      'fails',
      'import sys\nprint("about to fail", flush=True)\nsys.exit(3)\n',
    );
    const launched = { ...meta, ...(await executor.launch({ meta, runDir, gpuIndices: [] })) };
    const final = await waitForState(executor, launched, isOver, 'the job to fail');
    expect(final).toEqual({ kind: 'exited', exitCode: 3, reason: 'Job failed with exit code: 3' });
    expect(await readOutput(runDir)).toContain('about to fail');
    await executor.close();
  });

  it('refuses pause, and stop cancels the job: the process ends and its last lines are kept', async () => {
    const executor = emulatorExecutor(emulator, runsDir);
    const { meta, runDir } = await makeRun(runsDir, 'forever', FOREVER_SCRIPT);
    const launched = { ...meta, ...(await executor.launch({ meta, runDir, gpuIndices: [] })) };
    const jobId = launched.jobId ?? '';
    await waitFor(
      async () => ((await readOutput(runDir)).includes('tick 3') ? true : undefined),
      'ticks in output.log',
    );
    const pid = emulator.pidOf(jobId);
    expect(pid).toBeGreaterThan(0);

    await expect(executor.terminate(launched, { graceMs: 1_000, reason: 'pause' })).rejects.toThrow(
      /HF Jobs cannot pause a job/,
    );
    expect(emulator.job(jobId)?.status.stage).toBe('RUNNING');

    const stopped = await executor.terminate(launched, { graceMs: 1_000, reason: 'stop' });
    expect(stopped).toEqual({ kind: 'signaled', signal: 'SIGTERM', crashClass: 'cancelled' });
    expect(emulator.job(jobId)?.status.stage).toBe('CANCELED');
    expect(emulator.requests.some((request) => request.path.endsWith(`/${jobId}/cancel`))).toBe(true);
    expect(processAlive(pid ?? 0)).toBe(false);
    expect(countLines(await readOutput(runDir), 'saving checkpoint at stop')).toBe(1);
    await executor.close();
  });

  it('watches a job started elsewhere: follows its log and cancels it by id', async () => {
    const foreign = await runJob({
      hubUrl: emulator.url,
      accessToken: emulator.token,
      namespace: emulator.namespace,
      dockerImage: 'python:3.12',
      flavor: 'cpu-basic',
      command: [
        'python3',
        '-u',
        '-c',
        'import time\nfor i in range(1000):\n    print(f"foreign {i}", flush=True)\n    time.sleep(0.1)\n',
      ],
      timeoutSeconds: 600,
    });
    const executor = emulatorExecutor(emulator, runsDir);
    const meta = testRunMeta('watched', {
      executor: 'hfjobs',
      watch: { source: 'hfjobs', jobId: foreign.id, namespace: emulator.namespace },
    });
    const runDir = path.join(runsDir, 'watched');
    await import('node:fs/promises').then((fs) => fs.mkdir(runDir, { recursive: true }));
    await waitForState(executor, meta, (state) => state.kind === 'alive', 'the foreign job to run');
    await waitFor(
      async () => ((await readOutput(runDir)).includes('foreign 2') ? true : undefined),
      'its log',
    );
    expect(await executor.terminate(meta, { graceMs: 1_000, reason: 'stop' })).toMatchObject({
      crashClass: 'cancelled',
    });
    expect(emulator.job(foreign.id)?.status.stage).toBe('CANCELED');
    expect(countLines(await readOutput(runDir), 'foreign 0')).toBe(1);
    await executor.close();
  });

  it('refuses an unknown flavour with the list, before any job exists', async () => {
    const executor = emulatorExecutor(emulator, runsDir);
    const { meta, runDir } = await makeRun(runsDir, 'bad-flavour', 'print("never")\n', {
      flavor: 'a10g-tiny',
    });
    const before = emulator.allJobs().length;
    const refusal = executor.launch({ meta, runDir, gpuIndices: [] });
    await expect(refusal).rejects.toBeInstanceOf(RunError);
    await expect(refusal).rejects.toThrow(
      /unknown HF Jobs flavour "a10g-tiny"; available: cpu-basic, .*a10g-small/,
    );
    await expect(executor.placement?.({ gpus: 1, maxHours: 1, flavor: 'a10g-tiny' })).rejects.toThrow(
      /available: /,
    );
    expect(emulator.allJobs().length).toBe(before);
    await executor.close();
  });

  it('sends a script far over one argument’s size in pieces, and the job still runs it', async () => {
    const executor = emulatorExecutor(emulator, runsDir);
    const { randomBytes } = await import('node:crypto');
    const filler = randomBytes(300_000).toString('base64');
    const script = `# ${filler}\nprint("big script ran", flush=True)\n`;
    const { meta, runDir } = await makeRun(runsDir, 'big-script', script);
    const launched = { ...meta, ...(await executor.launch({ meta, runDir, gpuIndices: [] })) };
    const command = emulator.job(launched.jobId ?? '')?.command ?? [];
    expect(command.length).toBeGreaterThan(5);
    expect(Math.max(...command.map((word) => Buffer.byteLength(word)))).toBeLessThan(131_072);
    expect(await waitForState(executor, launched, isOver, 'the big job to end')).toEqual({
      kind: 'exited',
      exitCode: 0,
    });
    expect(await readOutput(runDir)).toContain('big script ran');
    await executor.close();
  });

  it('runs a command run: its argv with the script written first, path made relative', async () => {
    const executor = emulatorExecutor(emulator, runsDir);
    const workspace = path.join(runsDir, 'workspace', 'project');
    const { mkdir, writeFile } = await import('node:fs/promises');
    await mkdir(workspace, { recursive: true });
    const scriptPath = path.join(workspace, 'cmd_train.py');
    await writeFile(scriptPath, 'import sys\nprint("args", sys.argv[1:], flush=True)\n');
    const { meta, runDir } = await makeRun(runsDir, 'command-run', '', {
      command: ['python3', '-u', scriptPath, '--lr', '0.1'],
      cwd: workspace,
      scriptPath,
    });
    const launched = { ...meta, ...(await executor.launch({ meta, runDir, gpuIndices: [] })) };
    const payload = decodeJobPayload(emulator.job(launched.jobId ?? '')?.command ?? []);
    expect(payload.command).toEqual(['python3', '-u', 'cmd_train.py', '--lr', '0.1']);
    expect(await waitForState(executor, launched, isOver, 'the command to end')).toEqual({
      kind: 'exited',
      exitCode: 0,
    });
    expect(await readOutput(runDir)).toContain("args ['--lr', '0.1']");
    await executor.close();
  });

  it('needs the token: without it the Hub answers 401 and launch says which setting to fix', async () => {
    const executor = emulatorExecutor(emulator, runsDir, { token: 'hf_wrong' });
    const { meta, runDir } = await makeRun(runsDir, 'no-token', 'print(1)\n', { gpus: 0 });
    await expect(executor.launch({ meta, runDir, gpuIndices: [] })).rejects.toThrow(
      /HTTP 401 \(Invalid credentials in Authorization header\); SHEPHERD_HUB_TOKEN needs the job scope/,
    );
    await executor.close();
  });
});
