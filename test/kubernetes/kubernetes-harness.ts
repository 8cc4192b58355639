import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadAllYaml } from '@kubernetes/client-node';
import { z } from 'zod';
import { createLogger } from '../../src/logger.js';
import type { Executor, ProcessState } from '../../src/runs/executor.js';
import {
  createKubernetesExecutor,
  type KubernetesExecutor,
} from '../../src/runs/kubernetes/kubernetes-executor.js';
import type { KubernetesSettings } from '../../src/runs/kubernetes/kubernetes-job-manifest.js';
import { type MetricPoint, parseMetricLine } from '../../src/runs/metric-line.js';
import { PYTHON_RUNTIME_DIR } from '../../src/runs/records/run-files.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import type { KubernetesEmulator } from '../emulators/kubernetes-api-server.js';
import { testRunMeta } from '../helpers/run-meta.js';

export const silentLogger = createLogger('silent');
export const REPOSITORY = fileURLToPath(new URL('../../', import.meta.url));

/**
 * A training script for the pods: prints `step=N loss=X` (X is `nan` at `--nan-at`), logs metrics with
 * the helper, checkpoints on SIGTERM through `shepherd.on_stop`, resumes from resume.json.
 */
export const TRAIN_SCRIPT = `import argparse, os, time
import shepherd

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--sleep", type=float, default=0.05)
parser.add_argument("--nan-at", type=int, default=-1)
parser.add_argument("--exit", type=int, default=0)
options = parser.parse_args()

resume = shepherd.resume_info()
first = 1 if resume["step"] is None else resume["step"] + 1
print("starting at step {} (launch {}, rank {})".format(first, os.environ.get("SHEPHERD_LAUNCH"), os.environ.get("NODE_RANK", "-")), flush=True)
state = {"step": first - 1}

def save():
    shepherd.save_checkpoint(state["step"], "ckpt-{}.pt".format(state["step"]))
    print("SIGTERM handled: checkpoint at step {}".format(state["step"]), flush=True)

shepherd.on_stop(save)
for step in range(first, options.steps + 1):
    loss = float("nan") if step == options.nan_at else 1.0 / step
    print("step={} loss={}".format(step, loss), flush=True)
    shepherd.log_metrics(step=step, loss=loss)
    state["step"] = step
    time.sleep(options.sleep)
print("training done", flush=True)
shepherd.finish()
raise SystemExit(options.exit)
`;

export function testSettings(overrides: Partial<KubernetesSettings> = {}): KubernetesSettings {
  return {
    kubeconfig: undefined,
    namespace: 'ml',
    image: 'registry.example.com/train:1',
    queue: undefined,
    pvc: undefined,
    gpuHourUsd: 2.5,
    ...overrides,
  };
}

export const FAST_TIMING = {
  checkMs: 50,
  marginMs: 20_000,
  leaseMs: 2_000,
  idleReconnectMs: 30_000,
  retryMs: 50,
  finishMs: 10_000,
};

export function newExecutor(
  emulator: KubernetesEmulator,
  runsDir: string,
  settings: KubernetesSettings = testSettings(),
  graceS = 5,
): KubernetesExecutor {
  return createKubernetesExecutor({
    settings,
    graceS,
    runDir: (runId) => path.join(runsDir, runId),
    helperDir: PYTHON_RUNTIME_DIR,
    logger: silentLogger,
    kubeConfig: emulator.kubeConfig(),
    timing: FAST_TIMING,
  });
}

let counter = 0;

/** A run directory with train.py, and its meta as the launcher hands it over (launchCount already 1). */
export async function makeRun(runsDir: string, overrides: Partial<RunMeta> = {}): Promise<RunMeta> {
  counter += 1;
  const id = `r-0601-${(counter + Math.floor(Math.random() * 0xf000)).toString(16).padStart(4, '0')}`;
  await mkdir(path.join(runsDir, id), { recursive: true });
  await writeFile(path.join(runsDir, id, 'train.py'), TRAIN_SCRIPT, 'utf8');
  return testRunMeta(id, { name: `train-${counter}`, executor: 'kubernetes', launchCount: 1, ...overrides });
}

export async function makeRunsDir(): Promise<string> {
  return mkdtemp(path.join(tmpdir(), 'k8s-runs-'));
}

export async function readLog(runsDir: string, runId: string): Promise<string> {
  return readFile(path.join(runsDir, runId, 'output.log'), 'utf8').catch(() => '');
}

/** The run's metrics.jsonl, parsed as the monitor parses it. */
export async function readMetrics(runsDir: string, runId: string): Promise<MetricPoint[]> {
  const text = await readFile(path.join(runsDir, runId, 'metrics.jsonl'), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const parsed = parseMetricLine(line);
      if (!parsed.ok) throw new Error(`metrics.jsonl line unreadable (${parsed.reason}): ${line}`);
      return parsed.point;
    });
}

export async function waitFor<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function stateOf(executor: Executor, meta: RunMeta): Promise<ProcessState | undefined> {
  return (await executor.poll([meta])).get(meta.id);
}

/** Poll (which also keeps the log follower going) until the state passes `accept`. */
export function waitForState(
  executor: Executor,
  meta: RunMeta,
  accept: (state: ProcessState) => boolean,
  what: string,
  timeoutMs = 30_000,
): Promise<ProcessState> {
  return waitFor(
    async () => {
      const state = await stateOf(executor, meta);
      return state !== undefined && accept(state) ? state : undefined;
    },
    what,
    timeoutMs,
  );
}

const ruleSchema = z.object({
  apiGroups: z.array(z.string()),
  resources: z.array(z.string()),
  verbs: z.array(z.string()),
});
const rbacDocument = z.looseObject({ kind: z.string(), rules: z.array(ruleSchema).optional() });

/** Every (group, resource, verb) the Role and ClusterRole in deploy/kubernetes/rbac.yaml grant, as `group/resource/verb`. */
export async function grantedCalls(): Promise<Set<string>> {
  const text = await readFile(path.join(REPOSITORY, 'deploy/kubernetes/rbac.yaml'), 'utf8');
  const granted = new Set<string>();
  for (const raw of loadAllYaml(text)) {
    const document = rbacDocument.parse(raw);
    if (document.kind !== 'Role' && document.kind !== 'ClusterRole') continue;
    for (const rule of document.rules ?? []) {
      for (const group of rule.apiGroups) {
        for (const resource of rule.resources)
          for (const verb of rule.verbs) granted.add(`${group}/${resource}/${verb}`);
      }
    }
  }
  return granted;
}

/** The emulator's authoriser for those grants: anything else is 403, as RBAC answers. */
export async function rbacAuthorizer() {
  const granted = await grantedCalls();
  return (call: { verb: string; group: string; resource: string }) =>
    granted.has(`${call.group}/${call.resource}/${call.verb}`);
}
