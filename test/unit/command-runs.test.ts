import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parsePlainCommand, splitCommandLine } from '../../src/commands/parse-command.js';
import { loadConfig } from '../../src/config/config.js';
import { parseEnvironments } from '../../src/config/environments.js';
import { commandWarnings, formatCommand, processesPerNode } from '../../src/runs/launch/command-launch.js';
import { applyEnvironment, pickEnvironment } from '../../src/runs/named-environments.js';
import { expandOutputPattern, parseScontrolJob } from '../../src/runs/slurm/slurm-job-info.js';
import { renderJobScript } from '../../src/runs/slurm/slurm-job-script.js';
import { endingFromLog } from '../../src/runs/watched-executor.js';

describe('run -- <command> and watch commands', () => {
  it('takes everything after -- as the argv, options before it', () => {
    expect(
      parsePlainCommand(
        '@shepherd run --gpus 4 --name qwen --env torch2 -- torchrun --nproc_per_node 4 train.py --lr 3e-4',
      ),
    ).toEqual({
      name: 'run',
      command: ['torchrun', '--nproc_per_node', '4', 'train.py', '--lr', '3e-4'],
      gpus: 4,
      runName: 'qwen',
      env: 'torch2',
    });
    expect(parsePlainCommand('run --cwd exp --nodes 2 -- accelerate launch "my train.py"')).toEqual({
      name: 'run',
      command: ['accelerate', 'launch', 'my train.py'],
      cwd: 'exp',
      nodes: 2,
    });
    // Slack turns `--` into an em dash.
    expect(parsePlainCommand('run — python -m pkg.train')).toEqual({
      name: 'run',
      command: ['python', '-m', 'pkg.train'],
    });
    expect(parsePlainCommand('run train.sh --gpus 1')).toEqual({ name: 'run', path: 'train.sh', gpus: 1 });
    expect(parsePlainCommand('run --')).toEqual({
      name: 'invalid',
      command: 'run',
      error: 'nothing after `--`: give the command to run',
    });
    expect(parsePlainCommand('run --nodes 0 -- bash x.sh')).toMatchObject({ name: 'invalid' });
    expect(splitCommandLine(`a 'b c' "d"`)).toEqual(['a', 'b c', 'd']);
    expect(splitCommandLine(`a 'b`)).toBeUndefined();
  });

  it('parses watch targets and leaves sentences to the agent', () => {
    expect(parsePlainCommand('@shepherd watch slurm:12345 --name sft')).toEqual({
      name: 'watch',
      target: { kind: 'slurm', jobId: '12345' },
      runName: 'sft',
    });
    expect(parsePlainCommand('watch logs/train.log --pid 4242')).toEqual({
      name: 'watch',
      target: { kind: 'log', path: 'logs/train.log', pid: 4242 },
    });
    expect(parsePlainCommand('watch the loss for me')).toBeUndefined();
    expect(parsePlainCommand('watch slurm:12 --pid 3')).toMatchObject({ name: 'invalid' });
  });

  it('warns when the launcher starts another number of processes than GPUs asked for', () => {
    expect(processesPerNode(['torchrun', '--nproc_per_node=8', 'train.py'])).toEqual({
      flag: '--nproc_per_node',
      value: 8,
    });
    expect(commandWarnings({ command: ['torchrun', '--nproc_per_node', '4', 't.py'], gpus: 2 })[0]).toMatch(
      /--nproc_per_node 4 does not match the 2 GPUs asked for/,
    );
    expect(commandWarnings({ command: ['torchrun', '--nproc_per_node', '2', 't.py'], gpus: 2 })).toEqual([]);
    expect(
      commandWarnings({ command: ['accelerate', 'launch', '--num_processes', '1', 't.py'], gpus: 2 }),
    ).toHaveLength(1);
    expect(formatCommand(['python', '-c', 'print(1)'])).toBe(`python -c 'print(1)'`);
  });
});

describe('environments', () => {
  it('reads SHEPHERD_ENVIRONMENTS as JSON or from a file; a bad default is a config error', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'shepherd-envs-')), 'envs.json');
    writeFileSync(file, JSON.stringify({ a: { venv: '/opt/a' } }));
    expect(parseEnvironments(file)).toEqual({ a: { venv: '/opt/a' } });
    expect(parseEnvironments('{"b": {"conda": "base"}}')).toEqual({ b: { conda: 'base' } });
    expect(() => parseEnvironments('{"b": {"pip": "x"}}')).toThrow();
    expect(() => loadConfig({ SHEPHERD_ENVIRONMENTS: '{"a": {}}', SHEPHERD_DEFAULT_ENV: 'zzz' })).toThrow(
      /SHEPHERD_DEFAULT_ENV/,
    );
    expect(
      loadConfig({ SHEPHERD_ENVIRONMENTS: '{"a": {}}', SHEPHERD_DEFAULT_ENV: 'a' }).runs.defaultEnvironment,
    ).toBe('a');
    expect(() => pickEnvironment({ a: {} }, 'b', undefined)).toThrow(
      'unknown environment "b"; known environments: a',
    );
    expect(pickEnvironment({ a: {} }, undefined, 'a')).toEqual({ name: 'a', spec: {} });
  });

  it('applies venv, conda, python and env to an argv', () => {
    expect(applyEnvironment(['python', '-u', 'train.py'], { venv: '/v', env: { X: '1' } })).toEqual({
      argv: ['/v/bin/python', '-u', 'train.py'],
      pathPrefix: ['/v/bin'],
      variables: { VIRTUAL_ENV: '/v', X: '1' },
    });
    expect(applyEnvironment(['torchrun', 't.py'], { conda: 'torch2' }).argv).toEqual([
      'conda',
      'run',
      '--no-capture-output',
      '-n',
      'torch2',
      'torchrun',
      't.py',
    ]);
    expect(
      applyEnvironment(['python3', 't.py'], { python: '/opt/py/bin/python3.10', container: 'img.sif' }),
    ).toMatchObject({
      argv: ['/opt/py/bin/python3.10', 't.py'],
      container: 'img.sif',
    });
  });

  it('writes pyxis and apptainer containers into the Slurm job script, with their GPUs and mounts', () => {
    const base = {
      python: 'python3',
      script: 'train.py',
      launchNumber: 1,
      scriptVersion: 1,
      runtimeDir: '/rt',
      environment: {},
    };
    const mounts = [{ path: '/data/runs/r-1' }, { path: '/ws' }, { path: '/rt', readOnly: true }];
    const pyxis = renderJobScript({
      ...base,
      command: ['torchrun', 't.py'],
      srun: true,
      container: { image: 'nvcr.io/x:1', mode: 'pyxis', gpus: true, mounts },
    });
    expect(pyxis).toContain(
      `--container-image='nvcr.io/x:1' '--container-mounts=/data/runs/r-1:/data/runs/r-1,/ws:/ws,/rt:/rt:ro' --container-workdir="$PWD" 'torchrun' 't.py'`,
    );
    expect(pyxis).toContain(
      'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
    );
    const apptainer = renderJobScript({
      ...base,
      command: ['python3', 't.py'],
      pathPrefix: ['/v/bin'],
      container: { image: 'i.sif', mode: 'apptainer', gpus: true, mounts },
    });
    expect(apptainer).toContain(
      `exec 'apptainer' 'exec' '--nv' '--bind' '/data/runs/r-1:/data/runs/r-1' '--bind' '/ws:/ws' '--bind' '/rt:/rt:ro' 'i.sif' 'python3' 't.py'`,
    );
    expect(apptainer).toContain(`export PATH='/v/bin':"$PATH"`);
    // A CPU job gets no --nv: there are no NVIDIA devices to bind.
    const cpu = renderJobScript({
      ...base,
      command: ['python3', 't.py'],
      container: { image: 'i.sif', mode: 'apptainer', gpus: false, mounts },
    });
    expect(cpu).toContain(`exec 'apptainer' 'exec' '--bind' '/data/runs/r-1:/data/runs/r-1' '--bind'`);
    expect(cpu).not.toContain(`'--nv'`);
    // A plain train.py run is unchanged.
    expect(renderJobScript(base)).toContain(`exec 'python3' -u 'train.py'`);
    // A sweep trial's values follow the script, quoted, as the local launcher passes them.
    expect(renderJobScript({ ...base, args: ['--lr', '3e-4', '--name', "it's"] })).toContain(
      `exec 'python3' -u 'train.py' '--lr' '3e-4' '--name' 'it'\\''s'`,
    );
  });
});

describe('watched runs', () => {
  it('reads a hand-submitted job from scontrol and expands output patterns', () => {
    const fields = parseScontrolJob(
      'JobId=42 JobName=sft UserId=ana(1000) JobState=RUNNING WorkDir=/home/ana StdOut=/home/ana/sft-42.out',
    );
    expect(fields).toMatchObject({
      JobId: '42',
      JobName: 'sft',
      JobState: 'RUNNING',
      StdOut: '/home/ana/sft-42.out',
    });
    expect(expandOutputPattern('logs/%x-%j.%%.out', { jobId: '42', name: 'sft' })).toBe('logs/sft-42.%.out');
  });

  it('judges a watched process that ended by the last lines of its log', () => {
    expect(
      endingFromLog('step=1 loss=1\nTraceback (most recent call last):\n  File "x"\nValueError: bad\n'),
    ).toEqual({
      kind: 'exited',
      exitCode: 1,
    });
    expect(endingFromLog('step=10 loss=0.1\ntraining done\n')).toEqual({ kind: 'exited', exitCode: 0 });
  });
});
