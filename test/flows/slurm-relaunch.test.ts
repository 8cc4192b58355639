import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { trainScript } from '../helpers/relaunch-script.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { waitFor } from '../runs/harness.js';
import { SKIP_MESSAGE, slurmAvailable, slurmConf, slurmEnvironment } from '../slurm/slurm-cluster.js';

/**
 * Issue 22 on the real one-node CI cluster: a job the cluster requeues (`scontrol requeue`) and a job whose
 * node goes DOWN (then RESUME) are both relaunched by Shepherd from their last checkpoint, under the same
 * approval, with one line in the thread. The node is always set back to RESUME, even when a test fails.
 */

const slurm = (args: string[]) =>
  execFileSync(args[0] ?? '', args.slice(1), { env: slurmEnvironment, encoding: 'utf8', timeout: 15_000 });

/**
 * The job's state while it is pending or running, else ''. Slurm forgets an ended job after `MinJobAge`
 * (5 s on the CI cluster): then squeue fails with "Invalid job id", which also means it is not queued.
 */
function queuedState(jobId: string): string {
  try {
    return slurm(['squeue', '-h', '-t', 'PENDING,RUNNING', '-j', jobId, '-o', '%T']).trim();
  } catch (error) {
    if (/Invalid job id/.test(String((error as { stderr?: unknown }).stderr ?? ''))) return '';
    throw error;
  }
}

/** Sets the node back to service unless it already is (Slurm refuses RESUME for a node that is not down). */
function resumeNode(node: string): void {
  const state = slurm(['sinfo', '-h', '-n', node, '-o', '%t']).trim();
  if (!/down|drain|fail/.test(state)) return;
  slurm(['scontrol', 'update', `nodename=${node}`, 'state=resume']);
}

const relaunchLines = (messages: PlaygroundMessage[]) =>
  botMessages(messages).filter((m) =>
    /; relaunched (from step [\d,]+|from scratch), retry \d+ of \d+$/.test(m.text),
  );

const checkpointSteps = (runDir: string) =>
  (existsSync(join(runDir, 'checkpoints.jsonl'))
    ? readFileSync(join(runDir, 'checkpoints.jsonl'), 'utf8')
    : ''
  )
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => (JSON.parse(line) as { step: number }).step);

describe.skipIf(!slurmAvailable)(
  `automatic relaunch on a real Slurm cluster${slurmAvailable ? '' : ` (skipped: ${SKIP_MESSAGE})`}`,
  () => {
    let llm: ScriptedLlmServer;
    let workspace: string;
    let shepherd: TestApp;
    const submitted = new Set<string>();

    beforeAll(async () => {
      llm = await startScriptedOpenAi({ fallback: { text: 'ok' } });
      workspace = mkdtempSync(join(tmpdir(), 'shepherd-slurm-relaunch-'));
      writeFileSync(join(workspace, 'train.py'), trainScript({ steps: 100_000, sleepS: 0.1 }));
      shepherd = await startTestApp({
        environment: {
          SHEPHERD_EXECUTOR: 'slurm',
          SHEPHERD_LLM_BASE_URL: llm.url,
          SHEPHERD_WORKSPACE: workspace,
          SHEPHERD_MONITOR_INTERVAL_S: '0.5',
          SHEPHERD_STOP_GRACE_S: '5',
          SHEPHERD_APPROVERS: 'bob',
          SHEPHERD_SELF_APPROVAL: 'false',
        },
        overrides: { runEnvironment: { PATH: process.env.PATH, SLURM_CONF: slurmConf } },
      });
    });

    afterAll(async () => {
      for (const run of (await shepherd?.app.features.runs.list()) ?? []) {
        if (run.status === 'running') await shepherd.app.features.runs.service.stop(run.id, 'system');
      }
      const leftover = [...submitted].filter(Boolean);
      if (leftover.length > 0) {
        try {
          slurm(['scancel', ...leftover]);
        } catch {
          // Already gone.
        }
      }
      await shepherd?.stop();
      await llm?.close();
      rmSync(workspace, { recursive: true, force: true });
    });

    /** Launches train.py, approves it and waits for a checkpoint at or past step 10 on Slurm. */
    async function launch(name: string) {
      const threadId = await shepherd.mention(`run train.py --gpus 0 --name ${name}`, 'alice');
      const messages = await shepherd.waitForMessages(
        threadId,
        (all) => cardsTitled(all, `Approve training run: ${name}`).length > 0,
        30_000,
      );
      const card = cardsTitled(messages, `Approve training run: ${name}`)[0];
      const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
      expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(
        200,
      );
      const meta = await waitFor(async () => {
        const current = await shepherd.app.features.runs.find(name);
        return current.status === 'running' && current.jobId !== undefined ? current : undefined;
      }, 30_000);
      submitted.add(meta.jobId ?? '');
      const runDir = join(shepherd.dataDir, 'runs', meta.id);
      await waitFor(
        () => checkpointSteps(runDir).some((step) => step >= 10) || undefined,
        90_000,
        'a checkpoint',
      );
      return { threadId, meta, runDir };
    }

    /** The relaunch line, the new job (a different id) and the resumed process; then the run is stopped. */
    async function expectRelaunched(
      name: string,
      threadId: string,
      runDir: string,
      oldJob: string,
      cause: RegExp,
    ) {
      const messages = await shepherd.waitForMessages(
        threadId,
        (all) => relaunchLines(all).length > 0,
        90_000,
      );
      const lines = relaunchLines(messages);
      expect(lines).toHaveLength(1);
      expect(lines[0]?.text).toMatch(cause);
      const from = Number(/relaunched from step ([\d,]+)/.exec(lines[0]?.text ?? '')?.[1]?.replace(/,/g, ''));
      expect(from).toBeGreaterThanOrEqual(10);
      const meta = await shepherd.app.features.runs.find(name);
      expect(meta.launchCount).toBe(2);
      expect(meta.jobId).not.toBe(oldJob);
      submitted.add(meta.jobId ?? '');
      await waitFor(
        () =>
          readFileSync(join(runDir, 'output.log'), 'utf8').includes(`resumed from step ${from}`) || undefined,
        120_000,
        'the relaunched job to resume',
      );
      // The old job is gone from the queue: Shepherd took the requeued job out rather than run it twice.
      expect(queuedState(oldJob)).toBe('');
      await shepherd.app.features.runs.service.stop(meta.id, 'system');
    }

    it('a job requeued by the cluster (scontrol requeue) is relaunched from its last checkpoint', async () => {
      const { threadId, meta, runDir } = await launch('requeued');
      slurm(['scontrol', 'requeue', meta.jobId ?? '']);
      await expectRelaunched(
        'requeued',
        threadId,
        runDir,
        meta.jobId ?? '',
        /^requeued: requeued by the cluster at step \d+ \(Slurm requeued the job\); relaunched from step [\d,]+, retry 1 of 2$/,
      );
    }, 240_000);

    it('a job whose node goes DOWN is relaunched once the node is back (RESUME)', async () => {
      const node = slurm(['sinfo', '-h', '-N', '-o', '%N']).trim().split('\n')[0] ?? '';
      expect(node).not.toBe('');
      const { threadId, meta, runDir } = await launch('node-down');
      try {
        slurm(['scontrol', 'update', `nodename=${node}`, 'state=down', 'reason=shepherd-relaunch-test']);
        await shepherd.waitForMessages(threadId, (all) => relaunchLines(all).length > 0, 90_000);
      } finally {
        resumeNode(node);
      }
      await expectRelaunched(
        'node-down',
        threadId,
        runDir,
        meta.jobId ?? '',
        /^node-down: (requeued by the cluster|node lost) at step \d+ \([^)]*\); relaunched from step [\d,]+, retry 1 of 2$/,
      );
    }, 240_000);
  },
);
