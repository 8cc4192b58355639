import { describe, expect, it } from 'vitest';
import {
  apptainerPrefix,
  containerMounts,
  engineRemoveArgv,
  engineRunArgv,
  pyxisMountsFlag,
} from '../../src/runs/container-argv.js';
import { engineLaunch, localLaunchPlan } from '../../src/runs/local-launch-plan.js';
import { testRunMeta } from '../helpers/run-meta.js';

/*
 * The argv that puts a run in an image. Docker and GPU passthrough cannot run here (no daemon, no GPU),
 * so the flags are checked against the engines' documented syntax: Docker's `--gpus '"device=2,3"'`
 * (docs.docker.com, "Resource constraints: GPU"), CDI names `nvidia.com/gpu=<index>` for Podman (NVIDIA
 * Container Toolkit, "Support for Container Device Interface"), Apptainer's `--nv` and `--bind src:dst:ro`.
 */

const RUN_DIR = '/data/runs/r-0101-abcd';
const WORKSPACE = '/srv/ws';
const HELPER = '/opt/shepherd/src/runs/python';

describe('container mounts', () => {
  it('keeps each path once, drops paths inside another mount, but never turns a writable path read-only', () => {
    expect(
      containerMounts([
        { path: `${WORKSPACE}/exp` },
        { path: RUN_DIR },
        { path: WORKSPACE },
        { path: `${RUN_DIR}/` },
        { path: HELPER, readOnly: true },
        undefined,
      ]),
    ).toEqual([{ path: WORKSPACE }, { path: RUN_DIR }, { path: HELPER, readOnly: true }]);
    expect(containerMounts([{ path: '/opt', readOnly: true }, { path: '/opt/ws' }])).toEqual([
      { path: '/opt', readOnly: true },
      { path: '/opt/ws' },
    ]);
  });

  it('refuses a path a bind spec cannot carry', () => {
    expect(() => containerMounts([{ path: '/data/a:b' }])).toThrow(/cannot be mounted/);
    expect(() => containerMounts([{ path: '/data/a,b' }])).toThrow(/cannot be mounted/);
  });

  it('writes apptainer binds and --nv only for GPU runs, and pyxis mounts as one list', () => {
    const mounts = [{ path: RUN_DIR }, { path: HELPER, readOnly: true }];
    expect(apptainerPrefix('img.sif', { gpus: true, mounts })).toEqual([
      'apptainer',
      'exec',
      '--nv',
      '--bind',
      `${RUN_DIR}:${RUN_DIR}`,
      '--bind',
      `${HELPER}:${HELPER}:ro`,
      'img.sif',
    ]);
    expect(apptainerPrefix('img.sif', { gpus: false, mounts })).not.toContain('--nv');
    expect(pyxisMountsFlag(mounts)).toBe(`--container-mounts=${RUN_DIR}:${RUN_DIR},${HELPER}:${HELPER}:ro`);
    expect(pyxisMountsFlag([])).toBeUndefined();
  });
});

describe('docker and podman argv', () => {
  const base = {
    image: 'ghcr.io/team/train:1',
    name: 'shepherd-r-0101-abcd',
    mounts: [{ path: RUN_DIR }, { path: HELPER, readOnly: true }],
    cwd: RUN_DIR,
    inherited: ['HF_HOME', 'SHEPHERD_RUN_DIR'],
    settings: { CUDA_VISIBLE_DEVICES: '0,1' },
    argv: ['python3', '-u', 'train.py'],
  };

  it('docker: the GPUs as one quoted device list, init, signal proxy, same-path mounts, names-only variables', () => {
    expect(engineRunArgv({ ...base, engine: 'docker', gpuIndices: [2, 3] })).toEqual([
      'docker',
      'run',
      '--rm',
      '--name',
      'shepherd-r-0101-abcd',
      '--init',
      '--sig-proxy=true',
      '--log-driver',
      'none',
      '--gpus',
      '"device=2,3"',
      '-v',
      `${RUN_DIR}:${RUN_DIR}`,
      '-v',
      `${HELPER}:${HELPER}:ro`,
      '-w',
      RUN_DIR,
      '-e',
      'HF_HOME',
      '-e',
      'SHEPHERD_RUN_DIR',
      '-e',
      'CUDA_VISIBLE_DEVICES=0,1',
      'ghcr.io/team/train:1',
      'python3',
      '-u',
      'train.py',
    ]);
    expect(engineRemoveArgv('docker', 'shepherd-r-0101-abcd')).toEqual([
      'docker',
      'rm',
      '-f',
      'shepherd-r-0101-abcd',
    ]);
  });

  it('podman: one CDI device per GPU, none for a CPU run, and a run user without new privileges', () => {
    const argv = engineRunArgv({
      ...base,
      engine: 'podman',
      gpuIndices: [2, 3],
      user: { uid: 1001, gid: 1002 },
    });
    expect(argv.slice(0, 2)).toEqual(['podman', 'run']);
    expect(argv.join(' ')).toContain('--device nvidia.com/gpu=2 --device nvidia.com/gpu=3 -v');
    expect(argv.join(' ')).toContain('--user 1001:1002 --security-opt no-new-privileges');
    expect(argv).not.toContain('--gpus');
    const cpu = engineRunArgv({ ...base, engine: 'podman', gpuIndices: [] });
    expect(cpu).not.toContain('--device');
    expect(cpu).not.toContain('--user');
    expect(engineRemoveArgv('podman', 'shepherd-x')).toEqual(['podman', 'rm', '-f', '-t', '0', 'shepherd-x']);
  });
});

describe('local launch plans', () => {
  const context = {
    runDir: RUN_DIR,
    python: '/usr/bin/python3',
    environments: {
      boxed: { container: '/images/train.sif' },
      venv: { venv: '/opt/venv', env: { HF_HOME: '/scratch/hf' } },
    },
    runtimeDir: HELPER,
    workspace: WORKSPACE,
  };

  it('an apptainer environment gets --nv with GPUs and binds the run dir, the workspace and the helper', () => {
    const meta = testRunMeta('r-0101-abcd', { environmentName: 'boxed', gpus: 2 });
    const plan = localLaunchPlan({ ...context, meta, gpuIndices: [2, 3] });
    expect(plan.argv).toEqual([
      'apptainer',
      'exec',
      '--nv',
      '--bind',
      `${WORKSPACE}:${WORKSPACE}`,
      '--bind',
      `${RUN_DIR}:${RUN_DIR}`,
      '--bind',
      `${HELPER}:${HELPER}:ro`,
      '/images/train.sif',
      '/usr/bin/python3',
      '-u',
      'train.py',
    ]);
    expect(plan.engine).toBeUndefined();
    const cpu = localLaunchPlan({ ...context, meta: { ...meta, gpus: 0 }, gpuIndices: [] });
    expect(cpu.argv).not.toContain('--nv');
  });

  it('a run with an image and an engine runs its command in the container with renumbered GPUs', () => {
    const meta = testRunMeta('r-0101-abcd', {
      image: 'ghcr.io/team/train:1',
      environmentName: 'venv',
      command: ['python', 'train.py', '--lr', '3e-4'],
      cwd: `${WORKSPACE}/exp`,
      gpus: 2,
    });
    const plan = localLaunchPlan({ ...context, meta, gpuIndices: [2, 3], container: { engine: 'podman' } });
    expect(plan.engine).toEqual({ engine: 'podman', image: 'ghcr.io/team/train:1' });
    const argv = plan.argv ?? [];
    const { argv: client, remove } = engineLaunch({
      engine: { engine: 'podman', image: 'ghcr.io/team/train:1' },
      plan: { ...plan, argv },
      meta,
      runDir: RUN_DIR,
      workspace: WORKSPACE,
      runtimeDir: HELPER,
      gpuIndices: [2, 3],
      runAs: { name: 'trainer', uid: 1001, gid: 1001 },
      environment: {
        PATH: '/usr/bin',
        HOME: '/root',
        HF_HOME: '/scratch/hf',
        HF_TOKEN: 'secret-value',
        SHEPHERD_RUN_DIR: RUN_DIR,
        CUDA_VISIBLE_DEVICES: '2,3',
        PYTHONPATH: `${HELPER}:/home/me/lib`,
        VIRTUAL_ENV: '/opt/venv',
        CONTAINERS_CONF: '/etc/x.conf',
      },
    });
    const line = client.join(' ');
    expect(line).toContain(`-v ${WORKSPACE}:${WORKSPACE} -v ${RUN_DIR}:${RUN_DIR} -v ${HELPER}:${HELPER}:ro`);
    expect(line).toContain(`-w ${WORKSPACE}/exp`);
    expect(line).toContain('--device nvidia.com/gpu=2 --device nvidia.com/gpu=3');
    expect(line).toContain('--user 1001:1001');
    // By name only: values (HF_TOKEN here) never land in argv; host-only variables stay out.
    expect(line).toContain('-e HF_HOME -e HF_TOKEN -e SHEPHERD_RUN_DIR');
    expect(line).not.toContain('secret-value');
    for (const hostOnly of ['PATH', 'VIRTUAL_ENV', 'CONTAINERS_CONF']) expect(client).not.toContain(hostOnly);
    expect(line).toContain(`-e CUDA_VISIBLE_DEVICES=0,1 -e PYTHONPATH=${HELPER} -e HOME=${RUN_DIR}`);
    // The venv's python is a host path: the command keeps what the environment made of it.
    expect(client.slice(-4)).toEqual(['/opt/venv/bin/python', 'train.py', '--lr', '3e-4']);
    expect(remove).toEqual(['podman', 'rm', '-f', '-t', '0', 'shepherd-r-0101-abcd']);
  });

  it('a train.py run in the default image uses the image python in the run directory', () => {
    const meta = testRunMeta('r-0101-abcd');
    const plan = localLaunchPlan({
      ...context,
      meta,
      gpuIndices: [],
      container: { engine: 'docker', image: 'pytorch/pytorch:2' },
    });
    expect(plan).toMatchObject({
      argv: ['python3', '-u', 'train.py'],
      cwd: RUN_DIR,
      engine: { engine: 'docker', image: 'pytorch/pytorch:2' },
    });
    // Without an image nothing changes: the launcher runs train.py itself.
    expect(
      localLaunchPlan({ ...context, meta, gpuIndices: [], container: { engine: 'docker' } }).argv,
    ).toBeUndefined();
  });

  it('refuses an image the local executor cannot honour', () => {
    const imageOnly = testRunMeta('r-0101-abcd', { image: 'x:1' });
    expect(() => localLaunchPlan({ ...context, meta: imageOnly, gpuIndices: [] })).toThrow(
      /no container engine \(set SHEPHERD_LOCAL_CONTAINER/,
    );
    const both = testRunMeta('r-0101-abcd', { image: 'x:1', environmentName: 'boxed' });
    expect(() =>
      localLaunchPlan({ ...context, meta: both, gpuIndices: [], container: { engine: 'podman' } }),
    ).toThrow(/Apptainer image \/images\/train.sif; it cannot also run in x:1/);
  });
});
