import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled, fetchesPng, metricSteps } from '../helpers/flow.js';
import { deleteKeysWithPrefix, uniquePrefix } from '../helpers/redis.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { untilEvery } from '../helpers/until.js';
import { SKIP_MESSAGE, slurmConf, slurmEnvironment } from '../slurm/slurm-cluster.js';

/*
 * The whole bot (playground, approvals, monitor) with SHEPHERD_EXECUTOR=slurm against the real one-node
 * CI cluster (2 fake GPUs). The GPU story runs as one sequence so its runs never compete with each other
 * for the two GPUs; the monitor story and the restart story use no GPUs and run alongside it.
 */

/** Logs a step every 0.1 s forever; on SIGTERM (pause/stop) saves a checkpoint; resumes from it. */
const LONG = `import os, time, shepherd
print("SLURM_GPUS_ON_NODE=%s" % os.environ.get("SLURM_GPUS_ON_NODE", ""), flush=True)
info = shepherd.resume_info()
start = 0 if info["step"] is None else info["step"] + 1
print("starting at step %d" % start, flush=True)
state = {"step": start - 1}
def save():
    if state["step"] >= 0:
        name = "ckpt-%d.txt" % state["step"]
        open(name, "w").write("weights at step %d" % state["step"])
        shepherd.save_checkpoint(state["step"], name)
shepherd.on_stop(save)
for step in range(start, 100000):
    shepherd.log_metrics(step=step, loss=1.0 / (step + 1))
    state["step"] = step
    time.sleep(0.1)
`;

/** Healthy until step 12, then the loss is NaN; ends cleanly. */
const NAN = `import time, shepherd
for step in range(1, 31):
    shepherd.log_metrics(step=step, loss=float("nan") if step >= 12 else 2.0 / step)
    time.sleep(0.05)
shepherd.finish()
`;

/** Crashes with exit code 3 after a few steps. */
const CRASH = `import sys, time, shepherd
for step in range(1, 6):
    shepherd.log_metrics(step=step, loss=1.0 / step)
    time.sleep(0.05)
print("Traceback (most recent call last):", file=sys.stderr)
print("RuntimeError: slurm flow crash", file=sys.stderr, flush=True)
sys.exit(3)
`;

/** Runs ~12 s and finishes: long enough to outlive a bot restart. */
const SURVIVOR = `import time, shepherd
for step in range(60):
    shepherd.log_metrics(step=step, loss=1.0 / (step + 1))
    time.sleep(0.2)
shepherd.finish()
`;

/**
 * Like `slurmAvailable` of slurm-cluster.ts, but also accepts a node in `comp` (a job completing), which it
 * shows for a moment whenever another Slurm test file's job ends: the file must not skip for that.
 */
function clusterAnswers(): boolean {
  if (slurmConf === undefined) return false;
  try {
    const states = execFileSync('sinfo', ['-h', '-o', '%t'], {
      env: slurmEnvironment,
      timeout: 10_000,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return /idle|mix|alloc|comp/.test(states);
  } catch {
    return false;
  }
}

const slurmAvailable = clusterAnswers();
const APPROVER = 'bob';
const submittedJobs = new Set<string>();

function botSaid(messages: PlaygroundMessage[], pattern: RegExp): boolean {
  return botMessages(messages).some((message) => pattern.test(message.text));
}

/** The job as Slurm itself sees it (`undefined` once it left squeue). */
function squeueJob(jobId: string): { state: string; name: string } | undefined {
  try {
    const line = execFileSync('squeue', ['-h', '-t', 'all', '-j', jobId, '-o', '%T|%j'], {
      env: slurmEnvironment,
      encoding: 'utf8',
      timeout: 10_000,
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    const [state, name] = line.split('|');
    return state === undefined || state === '' ? undefined : { state, name: name ?? '' };
  } catch {
    return undefined;
  }
}

/**
 * Other Slurm test files share the cluster's two GPUs and check exact pending reasons: wait until no job
 * of theirs holds or waits for a GPU before a GPU phase here, so neither side sees the other's queue.
 */
async function waitForForeignGpuJobs(): Promise<void> {
  await until(
    () => {
      const lines = execFileSync('squeue', ['-h', '-O', 'JobID:20,tres-per-node:40,tres-per-job:40'], {
        env: slurmEnvironment,
        encoding: 'utf8',
        timeout: 10_000,
      }).split('\n');
      return lines.every((line) => {
        const [jobId = '', ...tres] = line.trim().split(/\s+/);
        return jobId === '' || submittedJobs.has(jobId) || !tres.some((value) => /gpu/.test(value));
      });
    },
    'GPU jobs of other test files to finish',
    60_000,
  );
}

const until = untilEvery({ timeoutMs: 30_000, intervalMs: 200 });

/** Waits for the `index`-th card whose title contains `titlePart` and clicks its Approve as bob. */
async function approveCard(shepherd: TestApp, threadId: string, titlePart: string, index = 0): Promise<void> {
  const messages = await shepherd.waitForMessages(
    threadId,
    (all) => cardsTitled(all, titlePart).length > index,
    20_000,
  );
  const card = cardsTitled(messages, titlePart)[index];
  const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
  expect(approve, `an Approve button on "${titlePart}"`).toBeDefined();
  const result = await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', APPROVER);
  expect(result.status).toBe(200);
}

/** Starts a run by command and approves it; returns the thread and the run's Slurm job id. */
async function launch(
  shepherd: TestApp,
  script: string,
  name: string,
  gpus: number,
): Promise<{ threadId: string; runId: string; jobId: string }> {
  const threadId = await shepherd.mention(`run ${script} --gpus ${gpus} --name ${name}`, 'alice');
  await approveCard(shepherd, threadId, name);
  const where = gpus > 0 ? `on Slurm with ${gpus} GPU` : 'on Slurm';
  await shepherd.waitForMessages(threadId, (all) => botSaid(all, new RegExp(`${name} is running ${where}`)));
  const meta = await shepherd.app.features.runs.find(name);
  expect(meta.jobId).toMatch(/^\d+$/);
  submittedJobs.add(meta.jobId ?? '');
  return { threadId, runId: meta.id, jobId: meta.jobId ?? '' };
}

describe.skipIf(!slurmAvailable)(
  `playground flows on a real Slurm cluster${slurmAvailable ? '' : ` (skipped: ${SKIP_MESSAGE})`}`,
  () => {
    let llm: ScriptedLlmServer;
    let workspace: string;
    let shepherd: TestApp;
    const environment = (dataDir: string) => ({
      SHEPHERD_EXECUTOR: 'slurm',
      SHEPHERD_LLM_BASE_URL: llm.url,
      SHEPHERD_WORKSPACE: workspace,
      // The compute node is this host, so a local directory is "shared" with it.
      SHEPHERD_DATA_DIR: dataDir,
      SHEPHERD_MONITOR_INTERVAL_S: '0.5',
      SHEPHERD_STOP_GRACE_S: '5',
      SHEPHERD_APPROVERS: APPROVER,
      SHEPHERD_SELF_APPROVAL: 'false',
      // Alerts are posted without asking the model for a fix: this file is about Slurm, not triage.
      SHEPHERD_MAX_AUTOFIX: '0',
    });
    // The app hands its run environment to the Slurm CLI (and, via --export=ALL, to the jobs).
    const runEnvironment = { PATH: process.env.PATH, SLURM_CONF: slurmConf };
    const dataDirs: string[] = [];
    const newDataDir = () => {
      const dir = mkdtempSync(join(tmpdir(), 'shepherd-slurm-flow-'));
      dataDirs.push(dir);
      return dir;
    };

    beforeAll(async () => {
      llm = await startScriptedOpenAi({ fallback: { text: 'ok' } });
      workspace = mkdtempSync(join(tmpdir(), 'shepherd-slurm-workspace-'));
      writeFileSync(join(workspace, 'long.py'), LONG);
      writeFileSync(join(workspace, 'nan.py'), NAN);
      writeFileSync(join(workspace, 'crash.py'), CRASH);
      writeFileSync(join(workspace, 'survivor.py'), SURVIVOR);
      const dataDir = newDataDir();
      shepherd = await startTestApp({
        environment: environment(dataDir),
        dataDir,
        overrides: { runEnvironment },
      });
    });

    afterAll(async () => {
      // Whatever a failed test left on the cluster goes; jobs that already ended are ignored by scancel.
      if (submittedJobs.size > 0) {
        try {
          execFileSync('scancel', [...submittedJobs].filter(Boolean), {
            env: slurmEnvironment,
            timeout: 10_000,
            stdio: 'ignore',
          });
        } catch {
          // Already gone.
        }
      }
      await shepherd?.stop();
      await llm?.close();
      rmSync(workspace, { recursive: true, force: true });
      for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
    });

    it.concurrent('GPU runs: Slurm’s refusal, waiting for resources, and approve → run → pause → resume → stop', {
      timeout: 90_000,
    }, async () => {
      const runs = shepherd.app.features.runs;

      await waitForForeignGpuJobs();
      // 3 GPUs on a 2-GPU node: sbatch refuses, the thread gets Slurm's reason, the run is failed.
      const tooBig = await shepherd.mention('run long.py --gpus 3 --name too-big', 'alice');
      await approveCard(shepherd, tooBig, 'too-big');
      const refused = await shepherd.waitForMessages(tooBig, (all) =>
        botSaid(all, /too-big could not start/),
      );
      const refusal = botMessages(refused).find((m) => /too-big could not start/.test(m.text));
      expect(refusal?.text).toMatch(/launch failed: sbatch: .*Requested node configuration is not available/);
      const tooBigMeta = await runs.find('too-big');
      expect(tooBigMeta.status).toBe('failed');
      expect(tooBigMeta.statusReason).toMatch(/Requested node configuration is not available/);
      expect(tooBigMeta.jobId).toBeUndefined();

      // Two 2-GPU runs: the second waits for the first's GPUs, and says so in its thread.
      const first = await launch(shepherd, 'long.py', 'hog-a', 2);
      await until(() => squeueJob(first.jobId)?.state === 'RUNNING', 'hog-a RUNNING on Slurm');
      const second = await launch(shepherd, 'long.py', 'hog-b', 2);
      await shepherd.waitForMessages(second.threadId, (all) =>
        botSaid(all, /^hog-b: queued on Slurm: waiting for resources$/),
      );
      expect(squeueJob(second.jobId)?.state).toBe('PENDING');
      await shepherd.reply(second.threadId, '@shepherd status hog-b', 'carol');
      await shepherd.waitForMessages(second.threadId, (all) =>
        botSaid(all, /hog-b \(.*\): running \(Slurm job \d+\).*queued on Slurm: waiting for resources/),
      );
      expect(metricSteps(shepherd.dataDir, second.runId)).toEqual([]);
      // Freeing the GPUs lets the waiting job start.
      await shepherd.reply(first.threadId, 'stop hog-a', 'bob');
      await shepherd.waitForMessages(first.threadId, (all) => botSaid(all, /^Stopped hog-a\.$/));
      await until(() => metricSteps(shepherd.dataDir, second.runId).length >= 2, 'hog-b metrics');
      const hogOutput = readFileSync(join(shepherd.dataDir, 'runs', second.runId, 'output.log'), 'utf8');
      expect(hogOutput).toContain('SLURM_GPUS_ON_NODE=2');
      await shepherd.reply(second.threadId, 'stop hog-b', 'bob');
      await shepherd.waitForMessages(second.threadId, (all) => botSaid(all, /^Stopped hog-b\.$/));
      await until(() => squeueJob(second.jobId)?.state !== 'RUNNING', 'hog-b off the node');

      // The full life of a 1-GPU run.
      await waitForForeignGpuJobs();
      const life = await launch(shepherd, 'long.py', 'life', 1);
      const job = await until(() => {
        const seen = squeueJob(life.jobId);
        return seen?.state === 'RUNNING' ? seen : undefined;
      }, 'life RUNNING on Slurm');
      expect(job.name).toBe('life');
      await until(() => metricSteps(shepherd.dataDir, life.runId).length >= 5, 'metrics of life');
      const running = await runs.status('life');
      expect(running.process).toEqual({ kind: 'alive' });
      expect(readFileSync(join(shepherd.dataDir, 'runs', life.runId, 'output.log'), 'utf8')).toContain(
        'SLURM_GPUS_ON_NODE=1',
      );

      await shepherd.reply(life.threadId, '@shepherd pause life', 'bob');
      await shepherd.waitForMessages(life.threadId, (all) =>
        botSaid(all, /^Paused life at checkpoint step \d+; its GPUs are free\.$/),
      );
      const paused = await runs.status('life');
      expect(paused.meta.status).toBe('paused');
      const checkpointStep = paused.resume?.step ?? -1;
      expect(checkpointStep).toBeGreaterThanOrEqual(4);
      expect(
        readFileSync(join(shepherd.dataDir, 'runs', life.runId, paused.resume?.checkpoint ?? 'none'), 'utf8'),
      ).toBe(`weights at step ${checkpointStep}`);
      // The job ended on its own after saving (it was signalled, not killed).
      await until(() => squeueJob(life.jobId)?.state !== 'RUNNING', 'the paused job to leave the node');
      const stepsBefore = metricSteps(shepherd.dataDir, life.runId).length;

      // Resuming asks for a GPU again: a new approval card, then a new Slurm job from the checkpoint.
      await shepherd.reply(life.threadId, 'resume life', 'alice');
      await approveCard(shepherd, life.threadId, 'Approve resuming run: life');
      const resumedJob = await until(async () => {
        const meta = await runs.find('life');
        return meta.status === 'running' && meta.launchCount === 2 ? meta.jobId : undefined;
      }, 'life relaunched');
      submittedJobs.add(resumedJob);
      expect(resumedJob).not.toBe(life.jobId);
      await until(
        () => metricSteps(shepherd.dataDir, life.runId).length >= stepsBefore + 3,
        'metrics after resume',
      );
      expect(metricSteps(shepherd.dataDir, life.runId)[stepsBefore]).toBe(checkpointStep + 1);
      const log = readFileSync(join(shepherd.dataDir, 'runs', life.runId, 'output.log'), 'utf8');
      expect(log).toContain(`starting at step ${checkpointStep + 1}`);
      expect(log).toMatch(new RegExp(`=== launch 2 at .* slurm job ${resumedJob} on .*gpus 1\\) ===`));

      await shepherd.reply(life.threadId, 'stop life', 'bob');
      await shepherd.waitForMessages(life.threadId, (all) => botSaid(all, /^Stopped life\.$/));
      expect((await runs.find('life')).status).toBe('stopped');
      await until(() => squeueJob(resumedJob)?.state !== 'RUNNING', 'the stopped job to leave the node');
    });

    it.concurrent('the monitor alerts on a NaN run (with a chart) and on a crash with the exit code from Slurm', {
      timeout: 60_000,
    }, async () => {
      const [nan, crash] = await Promise.all([
        launch(shepherd, 'nan.py', 'nan-run', 0),
        launch(shepherd, 'crash.py', 'crash-run', 0),
      ]);

      const nanMessages = await shepherd.waitForMessages(
        nan.threadId,
        (all) => cardsTitled(all, 'nan-run: non-finite metric at step 12').length > 0,
        30_000,
      );
      const nanCard = cardsTitled(nanMessages, 'nan-run: non-finite metric')[0];
      expect(nanCard?.card?.text).toMatch(/loss became NaN at step 12/);
      expect(await fetchesPng(shepherd.url, nanCard?.card?.imageUrl)).toBe(true);

      const crashMessages = await shepherd.waitForMessages(
        crash.threadId,
        (all) => cardsTitled(all, 'crash-run failed').length > 0,
        30_000,
      );
      const crashCard = cardsTitled(crashMessages, 'crash-run failed')[0];
      expect(crashCard?.card?.text).toMatch(/crash-run failed \(exit 3\) at step 5/);
      expect(crashCard?.card?.text).toContain('RuntimeError: slurm flow crash');
      // The run service records the same end on its own (periodic) poll of Slurm.
      const crashed = await until(async () => {
        const meta = await shepherd.app.features.runs.find('crash-run');
        return meta.status === 'failed' ? meta : undefined;
      }, 'crash-run failed');
      expect(crashed.exitCode).toBe(3);
      expect(crashed.statusReason).toBe('exit 3');
      await shepherd.waitForMessages(crash.threadId, (all) => botSaid(all, /^crash-run failed \(exit 3\)$/));

      // The NaN run itself ended cleanly; its job completed on Slurm.
      await shepherd.waitForMessages(
        nan.threadId,
        (all) => cardsTitled(all, 'nan-run finished').length > 0,
        30_000,
      );
      await until(
        async () => (await shepherd.app.features.runs.find('nan-run')).status === 'completed',
        'nan-run completed',
      );
    });

    it.concurrent('a restarted bot re-attaches to a running Slurm job by id and reports its completion', {
      timeout: 60_000,
    }, async () => {
      const dataDir = newDataDir();
      const prefix = uniquePrefix('slurm-restart');
      const options = {
        environment: environment(dataDir),
        prefix,
        dataDir,
        keepState: true,
        overrides: { runEnvironment },
      };
      let first: TestApp | undefined = await startTestApp(options);
      let second: TestApp | undefined;
      try {
        const survivor = await launch(first, 'survivor.py', 'survivor', 0);
        await until(() => metricSteps(dataDir, survivor.runId).length >= 3, 'survivor metrics');
        await first.stop();
        first = undefined;

        // The bot is gone; the job is not.
        expect(squeueJob(survivor.jobId)?.state).toBe('RUNNING');
        const stepsWhileDown = metricSteps(dataDir, survivor.runId).length;

        second = await startTestApp(options);
        const reattached = await second.app.features.runs.find('survivor');
        expect(reattached.status).toBe('running');
        expect(reattached.jobId).toBe(survivor.jobId);
        expect(reattached.launchCount).toBe(1);

        const messages = await second.waitForMessages(
          survivor.threadId,
          (all) =>
            cardsTitled(all, 'survivor finished').length > 0 && botSaid(all, /survivor completed at step 59/),
          40_000,
        );
        expect(cardsTitled(messages, 'survivor finished')).toHaveLength(1);
        const done = await second.app.features.runs.find('survivor');
        expect(done.status).toBe('completed');
        expect(done.jobId).toBe(survivor.jobId);
        const steps = metricSteps(dataDir, survivor.runId);
        expect(steps.length).toBeGreaterThan(stepsWhileDown);
        expect(steps.at(-1)).toBe(59);
        // One job from start to end: no resubmission after the restart.
        const log = readFileSync(join(dataDir, 'runs', survivor.runId, 'output.log'), 'utf8');
        expect(log.match(/=== launch \d+ at/g)).toHaveLength(1);
      } finally {
        await first?.stop();
        await second?.stop();
        await deleteKeysWithPrefix(prefix);
      }
    });
  },
);
