import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { EVAL_PY, EVAL_TRAIN_PY } from '../helpers/eval-scripts.js';
import { cardsTitled } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { untilEvery } from '../helpers/until.js';
import { SKIP_MESSAGE, slurmAvailable, slurmConf, slurmEnvironment } from '../slurm/slurm-cluster.js';

/*
 * `--eval` on the real one-node CI cluster: the batch script runs the eval command in the run directory
 * after training exits 0 (status `evaluating`), and the run ends `completed` with the eval results, or with
 * an eval-failure alert and the training result kept: the local backend's semantics. CPU only.
 */

/** An eval that runs until it is killed, its pid in a file so the test can check it is gone. */
const LONG_EVAL_PY = `import os, sys, time
with open(sys.argv[1], "w") as handle:
    handle.write(str(os.getpid()))
print("eval: started", flush=True)
while True:
    time.sleep(0.1)
`;

const BAD_EVAL_PY = `import sys
def score():
    raise RuntimeError("slurm eval exploded on purpose")
score()
`;

interface MetaFile {
  status: string;
  exitCode?: number;
  jobId?: string;
  evaluation?: { status: string; exitCode?: number; results: Record<string, number> };
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function botSaid(messages: PlaygroundMessage[], pattern: RegExp): boolean {
  return botMessages(messages).some((message) => pattern.test(message.text));
}

const until = untilEvery({ timeoutMs: 60_000, intervalMs: 200 });

describe.skipIf(!slurmAvailable)(
  `--eval on a real Slurm cluster${slurmAvailable ? '' : ` (skipped: ${SKIP_MESSAGE})`}`,
  () => {
    let llm: ScriptedLlmServer;
    let workspace: string;
    let dataDir: string;
    let shepherd: TestApp;
    const jobs = new Set<string>();
    const metaOf = (runId: string) =>
      JSON.parse(readFileSync(join(dataDir, 'runs', runId, 'meta.json'), 'utf8')) as MetaFile;

    beforeAll(async () => {
      llm = await startScriptedOpenAi({ fallback: { text: 'ok' } });
      workspace = mkdtempSync(join(tmpdir(), 'shepherd-slurm-eval-workspace-'));
      dataDir = mkdtempSync(join(tmpdir(), 'shepherd-slurm-eval-'));
      writeFileSync(join(workspace, 'train_ok.py'), EVAL_TRAIN_PY);
      writeFileSync(join(workspace, 'eval.py'), EVAL_PY);
      writeFileSync(join(workspace, 'bad_eval.py'), BAD_EVAL_PY);
      writeFileSync(join(workspace, 'long_eval.py'), LONG_EVAL_PY);
      shepherd = await startTestApp({
        environment: {
          SHEPHERD_EXECUTOR: 'slurm',
          SHEPHERD_LLM_BASE_URL: llm.url,
          SHEPHERD_WORKSPACE: workspace,
          // The compute node is this host, so a local directory is "shared" with it.
          SHEPHERD_DATA_DIR: dataDir,
          SHEPHERD_MONITOR_INTERVAL_S: '0.5',
          SHEPHERD_APPROVERS: 'bob',
          SHEPHERD_SELF_APPROVAL: 'false',
          SHEPHERD_MAX_AUTOFIX: '0',
        },
        dataDir,
        overrides: { runEnvironment: { PATH: process.env.PATH, SLURM_CONF: slurmConf } },
      });
    });

    afterAll(async () => {
      if (jobs.size > 0) {
        try {
          execFileSync('scancel', [...jobs], { env: slurmEnvironment, timeout: 10_000, stdio: 'ignore' });
        } catch {
          // Already gone.
        }
      }
      await shepherd?.stop();
      await llm?.close();
      rmSync(workspace, { recursive: true, force: true });
      rmSync(dataDir, { recursive: true, force: true });
    });

    async function launch(name: string, evalCommand: string): Promise<{ threadId: string; runId: string }> {
      const threadId = await shepherd.mention(
        `run train_ok.py --gpus 0 --name ${name} --eval "${evalCommand}"`,
        'alice',
      );
      const messages = await shepherd.waitForMessages(
        threadId,
        (all) => cardsTitled(all, name).some((card) => card.card?.actions !== undefined),
        20_000,
      );
      const card = cardsTitled(messages, name)[0];
      const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
      expect(approve, 'an Approve button').toBeDefined();
      const result = await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob');
      expect(result.status).toBe(200);
      await shepherd.waitForMessages(threadId, (all) =>
        botSaid(all, new RegExp(`${name} is running on Slurm`)),
      );
      const meta = await shepherd.app.features.runs.find(name);
      expect(meta.jobId).toMatch(/^\d+$/);
      jobs.add(meta.jobId ?? '');
      return { threadId, runId: meta.id };
    }

    it('runs the eval in the run directory after training, status evaluating, then completed with its results', {
      timeout: 120_000,
    }, async () => {
      const release = join(workspace, 'release-eval');
      const { threadId, runId } = await launch(
        'slurm-eval',
        `python3 -u ${join(workspace, 'eval.py')} ${release}`,
      );
      await until(() => metaOf(runId).status === 'evaluating', 'status evaluating');
      await shepherd.waitForMessages(threadId, (all) =>
        botSaid(all, /slurm-eval: training finished; evaluating/),
      );
      writeFileSync(release, 'go');
      await until(() => metaOf(runId).status === 'completed', 'status completed');
      const meta = metaOf(runId);
      expect(meta.exitCode).toBe(0);
      expect(meta.evaluation).toEqual({
        status: 'passed',
        exitCode: 0,
        results: { eval_loss: 0.25, eval_accuracy: 0.875, eval_bleu: 31.5 },
        startedAt: expect.any(String),
        endedAt: expect.any(String),
      });
      const runDir = join(dataDir, 'runs', runId);
      expect(readFileSync(join(runDir, 'eval.log'), 'utf8')).toContain(`evaluating in ${runDir}\n`);
      expect(readFileSync(join(runDir, 'output.log'), 'utf8')).toContain(
        '=== evaluation ended: exit code 0 ===',
      );
    });

    it('stop during the eval ends the job and the eval: the run is stopped, with no crash or eval alert', {
      timeout: 120_000,
    }, async () => {
      const pidFile = join(workspace, 'long-eval.pid');
      const { threadId, runId } = await launch(
        'slurm-eval-stop',
        `python3 -u ${join(workspace, 'long_eval.py')} ${pidFile}`,
      );
      await until(() => metaOf(runId).status === 'evaluating', 'status evaluating');
      await until(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8') !== '', 'the eval to start');
      const evalPid = Number(readFileSync(pidFile, 'utf8'));
      const jobId = metaOf(runId).jobId ?? '';
      await shepherd.reply(threadId, 'stop slurm-eval-stop', 'alice');
      await until(() => metaOf(runId).status === 'stopped', 'status stopped');
      // Nothing is left: the job is out of the queue and the eval process is gone.
      const queued = () =>
        execFileSync('squeue', ['-h', '-j', jobId, '-o', '%i %T'], {
          env: slurmEnvironment,
          encoding: 'utf8',
          timeout: 10_000,
        }).trim();
      await until(() => queued() === '', `job ${jobId} to leave the queue`, 30_000);
      await until(() => !processAlive(evalPid), `the eval process ${evalPid} to end`, 30_000);
      // Give the monitor a few ticks to (wrongly) report it: a stop is neither a crash nor a failed eval.
      await shepherd.waitForMessages(threadId, (all) => botSaid(all, /^Stopped slurm-eval-stop/));
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const messages = await shepherd.messages(threadId);
      expect(cardsTitled(messages, 'evaluation failed')).toHaveLength(0);
      expect(cardsTitled(messages, 'slurm-eval-stop failed')).toHaveLength(0);
      expect(cardsTitled(messages, 'slurm-eval-stop finished')).toHaveLength(0);
      expect(botSaid(messages, /slurm-eval-stop (failed|crashed)|Triage of slurm-eval-stop/)).toBe(false);
      const meta = metaOf(runId);
      expect(meta.status).toBe('stopped');
      expect(meta.evaluation?.status).not.toBe('passed');
    });

    it('reports a failed eval like a crash, once, and keeps the training result', {
      timeout: 120_000,
    }, async () => {
      const { threadId, runId } = await launch(
        'slurm-bad-eval',
        `python3 -u ${join(workspace, 'bad_eval.py')}`,
      );
      const messages = await shepherd.waitForMessages(
        threadId,
        (all) => cardsTitled(all, 'slurm-bad-eval: evaluation failed').length > 0,
        60_000,
      );
      const meta = metaOf(runId);
      expect(meta.status).toBe('completed');
      expect(meta.exitCode).toBe(0);
      expect(meta.evaluation?.status).toBe('failed');
      expect(meta.evaluation?.exitCode).toBe(1);
      const alert = cardsTitled(messages, 'slurm-bad-eval: evaluation failed')[0]?.card;
      expect(alert?.text).toContain('RuntimeError: slurm eval exploded on purpose');
      expect(alert?.text).toContain('The training result and its checkpoints stay.');
      const later = await shepherd.messages(threadId);
      expect(cardsTitled(later, 'evaluation failed')).toHaveLength(1);
    });
  },
);
