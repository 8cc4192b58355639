import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  buildJobManifests,
  containerArgv,
  type JobFiles,
  type JobManifestInput,
  jobNameFor,
  parseKubernetesWatchTarget,
  templateHash,
} from '../../src/runs/kubernetes/kubernetes-job-manifest.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { testRunMeta } from '../helpers/run-meta.js';

const FILES: JobFiles = {
  script: { name: 'train.py', content: 'print("hi")\n' },
  helper: [
    { path: 'shepherd.py', content: '# helper\n' },
    { path: 'shepherd/integrations/hf.py', content: '# hf\n' },
  ],
};

function input(
  meta: Partial<RunMeta> = {},
  settings: Partial<JobManifestInput['settings']> = {},
): JobManifestInput {
  return {
    meta: testRunMeta('r-0601-abcd', {
      name: 'gpt-small',
      executor: 'kubernetes',
      gpus: 4,
      maxHours: 2,
      ...meta,
    }),
    settings: { image: 'ghcr.io/team/train:2', queue: undefined, pvc: undefined, ...settings },
    jobName: 'gpt-small-0601-abcd-1',
    graceS: 90,
    files: FILES,
  };
}

function environmentOf(manifests: ReturnType<typeof buildJobManifests>) {
  const container = manifests.job.spec?.template.spec?.containers[0];
  return Object.fromEntries(
    (container?.env ?? []).map((entry) => [entry.name, entry.value ?? entry.valueFrom]),
  );
}

describe('the Job', () => {
  it('asks for the GPUs, sets the deadline, never retries, never restarts, and names the run', () => {
    const { job } = buildJobManifests(input());
    expect(job.metadata?.labels).toEqual({
      'app.kubernetes.io/managed-by': 'shepherd',
      'shepherd.dev/run': 'r-0601-abcd',
    });
    expect(job.metadata?.annotations).toMatchObject({
      'shepherd.dev/launch': '1',
      'shepherd.dev/run-name': 'gpt-small',
    });
    expect(job.spec?.backoffLimit).toBe(0);
    expect(job.spec?.activeDeadlineSeconds).toBe(7200);
    expect(job.spec?.suspend).toBe(false);
    const pod = job.spec?.template.spec;
    expect(pod?.restartPolicy).toBe('Never');
    expect(pod?.terminationGracePeriodSeconds).toBe(90);
    expect(job.spec?.template.metadata?.labels).toEqual(job.metadata?.labels);
    const container = pod?.containers[0];
    expect(container?.image).toBe('ghcr.io/team/train:2');
    expect(container?.resources?.limits).toEqual({ 'nvidia.com/gpu': '4' });
    expect(container?.command).toEqual(['python', '-u', '/shepherd/files/train.py']);
    expect(container?.workingDir).toBe('/shepherd/run');
  });

  it('asks for no GPU resource on a CPU run, and rounds a fractional deadline up', () => {
    const { job } = buildJobManifests(input({ gpus: 0, maxHours: 0.0001 }));
    expect(job.spec?.template.spec?.containers[0]?.resources).toBeUndefined();
    expect(job.spec?.activeDeadlineSeconds).toBe(1);
  });

  it('carries the queue label and starts suspended under Kueue', () => {
    const { job, configMap } = buildJobManifests(input({}, { queue: 'team-a' }));
    expect(job.metadata?.labels?.['kueue.x-k8s.io/queue-name']).toBe('team-a');
    expect(job.spec?.suspend).toBe(true);
    expect(configMap.metadata?.labels?.['kueue.x-k8s.io/queue-name']).toBe('team-a');
  });

  it("sets the helper's environment, with the launch number read from the ConfigMap", () => {
    const manifests = buildJobManifests(
      input({ config: { lr: 0.1 }, args: ['--lr', '0.1'], launchCount: 3 }),
    );
    expect(environmentOf(manifests)).toEqual({
      SHEPHERD_RUN_DIR: '/shepherd/run',
      SHEPHERD_RUN_ID: 'r-0601-abcd',
      SHEPHERD_RUN_NAME: 'gpt-small',
      SHEPHERD_RUN_CONFIG: '{"lr":0.1}',
      SHEPHERD_RUN_ARGS: '["--lr","0.1"]',
      SHEPHERD_LAUNCH: { configMapKeyRef: { name: 'gpt-small-0601-abcd-1-files', key: 'launch' } },
      SHEPHERD_METRICS_STDOUT: '1',
      PYTHONPATH: '/shepherd/files/helper',
      PYTHONUNBUFFERED: '1',
    });
    expect(manifests.configMap.data?.launch).toBe('3');
    expect(manifests.job.spec?.template.spec?.containers[0]?.command).toEqual([
      'python',
      '-u',
      '/shepherd/files/train.py',
      '--lr',
      '0.1',
    ]);
  });
});

describe('the files', () => {
  it('puts the script and the helper in the ConfigMap and mounts them, the helper under helper/', () => {
    const { job, configMap } = buildJobManifests(input());
    expect(configMap.metadata?.name).toBe('gpt-small-0601-abcd-1-files');
    expect(configMap.data).toEqual({
      launch: '1',
      script: 'print("hi")\n',
      'helper.shepherd.py': '# helper\n',
      'helper.shepherd.integrations.hf.py': '# hf\n',
    });
    const volumes = job.spec?.template.spec?.volumes ?? [];
    expect(volumes[0]?.configMap?.items).toEqual([
      { key: 'script', path: 'train.py' },
      { key: 'helper.shepherd.py', path: 'helper/shepherd.py' },
      { key: 'helper.shepherd.integrations.hf.py', path: 'helper/shepherd/integrations/hf.py' },
    ]);
    const mounts = job.spec?.template.spec?.containers[0]?.volumeMounts;
    expect(mounts?.[0]).toEqual({ name: 'files', mountPath: '/shepherd/files', readOnly: true });
  });

  it('mounts the PVC as the run directory (the run id folder), else an emptyDir', () => {
    const withClaim = buildJobManifests(input({}, { pvc: 'shepherd-runs' })).job.spec?.template.spec;
    expect(withClaim?.volumes?.[1]).toEqual({
      name: 'run',
      persistentVolumeClaim: { claimName: 'shepherd-runs' },
    });
    expect(withClaim?.containers[0]?.volumeMounts?.[1]).toEqual({
      name: 'run',
      mountPath: '/shepherd/run',
      subPath: 'r-0601-abcd',
    });
    const without = buildJobManifests(input()).job.spec?.template.spec;
    expect(without?.volumes?.[1]).toEqual({ name: 'run', emptyDir: {} });
    expect(without?.containers[0]?.volumeMounts?.[1]).toEqual({ name: 'run', mountPath: '/shepherd/run' });
  });

  it("runs a command with its script pointed at the ConfigMap's copy", () => {
    const meta = testRunMeta('r-0601-abcd', {
      command: ['torchrun', '--nproc_per_node=8', 'src/train_big.py', '--epochs', '3'],
      cwd: '/work/ws',
      scriptPath: '/work/ws/src/train_big.py',
      args: ['--lr', '1e-4'],
    });
    expect(containerArgv(meta, 'train_big.py')).toEqual([
      'torchrun',
      '--nproc_per_node=8',
      '/shepherd/files/train_big.py',
      '--epochs',
      '3',
      '--lr',
      '1e-4',
    ]);
    const noScript = testRunMeta('r-0601-abcd', { command: ['bash', 'launch.sh'], cwd: '/work/ws' });
    expect(containerArgv(noScript)).toEqual(['bash', 'launch.sh']);
    const { job, configMap } = buildJobManifests({ ...input(), files: { helper: FILES.helper } });
    expect(configMap.data?.script).toBeUndefined();
    expect(job.spec?.template.spec?.volumes?.[0]?.configMap?.items?.map((item) => item.key)).not.toContain(
      'script',
    );
  });
});

describe('several nodes', () => {
  it('makes an Indexed Job with a headless Service and the torchrun variables', () => {
    const manifests = buildJobManifests(input({ nodes: 3 }));
    const { job, service } = manifests;
    expect(job.spec).toMatchObject({ completionMode: 'Indexed', completions: 3, parallelism: 3 });
    expect(job.spec?.template.spec?.subdomain).toBe('gpt-small-0601-abcd-1');
    expect(service?.spec).toEqual({
      clusterIP: 'None',
      publishNotReadyAddresses: true,
      selector: { 'batch.kubernetes.io/job-name': 'gpt-small-0601-abcd-1' },
      ports: [{ name: 'rendezvous', port: 29500 }],
    });
    expect(environmentOf(manifests)).toMatchObject({
      MASTER_ADDR: 'gpt-small-0601-abcd-1-0.gpt-small-0601-abcd-1',
      MASTER_PORT: '29500',
      WORLD_SIZE: '3',
      NNODES: '3',
      NODE_RANK: {
        fieldRef: { fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']" },
      },
    });
  });

  it("with --eval, only rank 0 evaluates; every rank exits with training's code", () => {
    const runDir = mkdtempSync(join(tmpdir(), 'k8s-rank-eval-'));
    const evalCommand = 'echo "evaluated by $NODE_RANK" >> evaluated.txt';
    const commandOf = (nodes: number, training: string[]) =>
      buildJobManifests(input({ nodes, command: training, evalCommand })).job.spec?.template.spec
        ?.containers[0]?.command ?? [];
    // The pod's command, run as the kubelet would: bash -c <script>, with the pod's rank in NODE_RANK.
    const runPod = (command: string[], rank: string | undefined) => {
      const [program = 'false', ...rest] = command;
      const environment: NodeJS.ProcessEnv = { PATH: process.env.PATH, SHEPHERD_RUN_DIR: runDir };
      if (rank !== undefined) environment.NODE_RANK = rank;
      return spawnSync(program, rest, { cwd: runDir, env: environment, encoding: 'utf8', timeout: 20_000 });
    };
    const rankCheck = '[ "$' + '{NODE_RANK:-0}" = 0 ]';
    try {
      const multi = commandOf(2, ['true']);
      expect(multi.join(' ')).toContain(rankCheck);
      expect(runPod(multi, '1').status).toBe(0);
      expect(existsSync(join(runDir, 'evaluation.json'))).toBe(false);
      expect(runPod(multi, '0').status).toBe(0);
      expect(readFileSync(join(runDir, 'evaluated.txt'), 'utf8')).toBe('evaluated by 0\n');
      expect(JSON.parse(readFileSync(join(runDir, 'evaluation.json'), 'utf8'))).toMatchObject({
        status: 'passed',
        exitCode: 0,
      });
      // A rank whose training failed exits with that code, and evaluates nothing either.
      expect(runPod(commandOf(2, ['sh', '-c', 'exit 3']), '1').status).toBe(3);
      // One node: no rank to check (NODE_RANK is not set there, and one set by the image does not matter).
      const single = commandOf(1, ['true']);
      expect(single.join(' ')).not.toContain(rankCheck);
      rmSync(join(runDir, 'evaluated.txt'));
      expect(runPod(single, '5').status).toBe(0);
      expect(readFileSync(join(runDir, 'evaluated.txt'), 'utf8')).toBe('evaluated by 5\n');
    } finally {
      rmSync(runDir, { recursive: true, force: true });
    }
  });

  it('makes neither for one node', () => {
    const { job, service } = buildJobManifests(input({ nodes: 1 }));
    expect(job.spec?.completionMode).toBeUndefined();
    expect(service).toBeUndefined();
    expect(environmentOf(buildJobManifests(input())).MASTER_ADDR).toBeUndefined();
  });
});

describe('names and hashes', () => {
  it('names Jobs DNS-safe, unique per run and launch, at most 52 characters, starting with a letter', () => {
    expect(jobNameFor({ id: 'r-0601-abcd', name: 'gpt-small', launchCount: 2 })).toBe(
      'gpt-small-0601-abcd-2',
    );
    expect(jobNameFor({ id: 'r-0601-abcd', name: 'My_Run.v2!!', launchCount: 1 })).toBe(
      'my-run-v2-0601-abcd-1',
    );
    expect(jobNameFor({ id: 'r-0601-abcd', name: '7b-finetune', launchCount: 1 })).toBe(
      'run-7b-finetune-0601-abcd-1',
    );
    const long = jobNameFor({ id: 'r-0601-abcd', name: 'x'.repeat(80), launchCount: 12 });
    expect(long.length).toBeLessThanOrEqual(52);
    expect(long).toMatch(/^[a-z]([-a-z0-9]*[a-z0-9])?$/);
    expect(long.endsWith('-0601-abcd-12')).toBe(true);
    expect(jobNameFor({ id: 'r-0601-abcd', name: 'a', launchCount: 1 })).not.toBe(
      jobNameFor({ id: 'r-0601-beef', name: 'a', launchCount: 1 }),
    );
  });

  it('hashes what a suspended Job cannot change: the same for another launch, different for other arguments', () => {
    const first = buildJobManifests(input({ launchCount: 1 })).job;
    const again = buildJobManifests(input({ launchCount: 2 })).job;
    const otherArgs = buildJobManifests(input({ args: ['--lr', '1'] })).job;
    expect(templateHash(again)).toBe(templateHash(first));
    expect(templateHash(otherArgs)).not.toBe(templateHash(first));
    expect(first.metadata?.annotations?.['shepherd.dev/template-hash']).toBe(templateHash(first));
  });

  it('refuses to build a Job without an image', () => {
    expect(() => buildJobManifests(input({}, { image: undefined }))).toThrow('no container image');
    expect(
      buildJobManifests(input({ image: 'mine:1' }, { image: undefined })).job.spec?.template.spec
        ?.containers[0]?.image,
    ).toBe('mine:1');
  });

  it('reads watch targets as namespace/job or job', () => {
    expect(parseKubernetesWatchTarget('research/their-job', 'ml')).toEqual({
      namespace: 'research',
      job: 'their-job',
    });
    expect(parseKubernetesWatchTarget('k8s:research/their-job', 'ml')).toEqual({
      namespace: 'research',
      job: 'their-job',
    });
    expect(parseKubernetesWatchTarget('their-job', 'ml')).toEqual({ namespace: 'ml', job: 'their-job' });
    expect(parseKubernetesWatchTarget('a/b/c', 'ml')).toBeUndefined();
    expect(parseKubernetesWatchTarget('Research/x', 'ml')).toBeUndefined();
    expect(parseKubernetesWatchTarget('', 'ml')).toBeUndefined();
  });
});
