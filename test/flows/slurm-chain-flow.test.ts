import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { cardsTitled } from '../helpers/flow.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { SKIP_MESSAGE, slurmAvailable, slurmConf, slurmEnvironment } from '../slurm/slurm-cluster.js';

/*
 * Issue 22, wall-time chains on the real CI cluster: a partition with MaxTime=1 minute (made here, deleted
 * after), a run of 0.05 h (3 minutes) → a chain of three 1-minute segments. The first segment trains until
 * Slurm's warning signal (USR1, SHEPHERD_STOP_GRACE_S before the limit) makes the helper save a checkpoint
 * and stop; Shepherd submits segment 2 under the same approval; it resumes and finishes in a few seconds.
 * slurmctld sends the warning at its first limit check (every ~30 s) at most grace + 30 s before the limit,
 * so with a 20 s grace it comes 10–40 s into the 60 s segment, always before the limit.
 */
const CHAIN = `import time, shepherd
info = shepherd.resume_info()
start = 0 if info["step"] is None else info["step"] + 1
print("starting at step %d" % start, flush=True)
state = {"step": start - 1}
def save():
    if state["step"] >= 0:
        open("ckpt.txt", "w").write(str(state["step"]))
        shepherd.save_checkpoint(state["step"], "ckpt.txt")
shepherd.on_stop(save)
# The first segment trains until its time limit; a resumed one finishes 10 steps later.
end = 10**9 if info["step"] is None else start + 10
for step in range(start, end):
    shepherd.log_metrics(step=step, loss=1.0 / (step + 1))
    state["step"] = step
    time.sleep(0.1)
shepherd.finish()
`;

const PARTITION = `chain${process.pid}`;
const scontrol = (...args: string[]) =>
  execFileSync('scontrol', args, { env: slurmEnvironment, timeout: 15_000, encoding: 'utf8' });

describe.skipIf(!slurmAvailable)(
  `wall-time chains on a real Slurm cluster${slurmAvailable ? '' : ` (skipped: ${SKIP_MESSAGE})`}`,
  () => {
    let llm: ScriptedLlmServer;
    let workspace: string;
    let shepherd: TestApp;
    const jobs = new Set<string>();

    beforeAll(async () => {
      scontrol('create', `PartitionName=${PARTITION}`, 'Nodes=ALL', 'MaxTime=1', 'State=UP');
      llm = await startScriptedOpenAi({ fallback: { text: 'ok' } });
      workspace = mkdtempSync(join(tmpdir(), 'shepherd-chain-'));
      writeFileSync(join(workspace, 'chain.py'), CHAIN);
      shepherd = await startTestApp({
        environment: {
          SHEPHERD_EXECUTOR: 'slurm',
          SHEPHERD_SLURM_PARTITION: PARTITION,
          SHEPHERD_LLM_BASE_URL: llm.url,
          SHEPHERD_WORKSPACE: workspace,
          SHEPHERD_MONITOR_INTERVAL_S: '0.5',
          SHEPHERD_STOP_GRACE_S: '20',
          SHEPHERD_APPROVERS: 'bob',
          SHEPHERD_MAX_AUTOFIX: '0',
        },
        overrides: { runEnvironment: { PATH: process.env.PATH, SLURM_CONF: slurmConf } },
      });
    });

    afterAll(async () => {
      if (jobs.size > 0) {
        try {
          execFileSync('scancel', [...jobs], { env: slurmEnvironment, timeout: 10_000, stdio: 'ignore' });
        } catch {
          // already gone
        }
      }
      await shepherd?.stop();
      await llm?.close();
      rmSync(workspace, { recursive: true, force: true });
      try {
        scontrol('delete', `PartitionName=${PARTITION}`);
      } catch {
        // never created
      }
    });

    it('runs hours above MaxTime as a chain of segments that resume from the checkpoint', {
      timeout: 240_000,
    }, async () => {
      const threadId = await shepherd.mention('run chain.py --gpus 0 --hours 0.05', 'alice');
      const pending = await shepherd.waitForMessages(threadId, (all) => cardsTitled(all, 'chain').length > 0);
      const card = cardsTitled(pending, 'chain')[0];
      const approve = card?.card?.actions?.find((action) => action.label === 'Approve');
      expect((await shepherd.click(threadId, card?.id ?? '', approve?.actionId ?? '', 'bob')).status).toBe(
        200,
      );
      await shepherd.waitForMessages(threadId, (all) =>
        botMessages(all).some((m) =>
          /chain is running on Slurm .*\(script v1, segment 1 of 3\)/.test(m.text),
        ),
      );
      const runs = shepherd.app.features.runs;
      const first = await runs.find('chain');
      jobs.add(first.jobId ?? '');
      const job = scontrol('show', 'job', '-o', first.jobId ?? '');
      expect(job).toMatch(/TimeLimit=00:01:00/);

      await shepherd.reply(threadId, '@shepherd status chain', 'alice');
      await shepherd.waitForMessages(threadId, (all) =>
        botMessages(all).some((m) => /chain \(.*\): running.*, segment 1 of 3/.test(m.text)),
      );

      const messages = await shepherd.waitForMessages(
        threadId,
        (all) => botMessages(all).some((m) => /chain completed/.test(m.text)),
        200_000,
      );
      const texts = botMessages(messages).map((m) => m.text);
      expect(
        texts.some((text) =>
          /segment 1 of 3 reached the partition's time limit; submitting segment 2 of 3 under the same approval, resuming from step \d+/.test(
            text,
          ),
        ),
      ).toBe(true);
      expect(
        texts.some((text) => /chain is running on Slurm .*\(script v1, segment 2 of 3\)/.test(text)),
      ).toBe(true);
      // One approval card for the whole chain, and no crash alert for the segment's end.
      expect(cardsTitled(messages, 'Approve')).toHaveLength(1);
      expect(cardsTitled(messages, 'failed')).toHaveLength(0);

      const done = await runs.find('chain');
      jobs.add(done.jobId ?? '');
      expect(done.launchCount).toBe(2);
      const log = readFileSync(join(shepherd.dataDir, 'runs', done.id, 'output.log'), 'utf8');
      // The helper took Slurm's warning signal, saved, and the second segment resumed from that step.
      expect(log).toMatch(/received SIGUSR1 \(the job's time limit is near\)/);
      const saved = Number(/checkpoint saved at step (\d+)/.exec(log)?.[1]);
      expect(log).toContain(`starting at step ${saved + 1}`);

      await shepherd.reply(threadId, '@shepherd status chain', 'alice');
      await shepherd.waitForMessages(threadId, (all) =>
        botMessages(all).some((m) => /chain \(.*\): completed.*, segment 2 of 3/.test(m.text)),
      );
    });
  },
);
