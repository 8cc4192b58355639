import { spawnSync } from 'node:child_process';
import { chown, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type CheckpointHistory,
  createCheckpointHistory,
} from '../../src/runs/checkpoints/checkpoint-history.js';
import { PYTHON_RUNTIME_DIR } from '../../src/runs/records/run-files.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { testRunMeta } from '../helpers/run-meta.js';
import { ALICE, BOB, createHarness, type Harness, waitFor } from './harness.js';

/**
 * Pinning the checkpoint a fix resumes from, and checking it again after the stop (issue 22), on real
 * files, real Redis and checkpoints recorded by the real helper (`shepherd.save_checkpoint`).
 */

/** Writes a checkpoint the way a training script does, then records it with the helper. */
const SAVE = `import os, sys, shepherd
step, target, mode, content = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
if mode == "in-place":
    with open(target, "w") as handle:
        handle.write(content)
elif mode == "rename":
    with open(target + ".tmp", "w") as handle:
        handle.write(content)
    os.replace(target + ".tmp", target)
else:
    os.makedirs(os.path.join(target, "sub"), exist_ok=True)
    for name in ("model.safetensors", "trainer_state.json", os.path.join("sub", "optimizer.pt")):
        with open(os.path.join(target, name), "w") as handle:
            handle.write(content + " " + name)
shepherd.save_checkpoint(step, target)
`;

const FIX = 'print("the fixed script")\n';
const NAN = { launch: 1, kind: 'nan', firstBadStep: 25 };

describe('pinned checkpoints and the re-check before a fix launch', () => {
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  let prefix: string;
  let root: string;
  let runDir: string;
  const runId = 'r-pins';

  beforeEach(async () => {
    prefix = uniquePrefix('pins');
    root = await mkdtemp(path.join(os.tmpdir(), 'shepherd-pins-'));
    runDir = path.join(root, runId);
    await mkdir(runDir);
    await writeFile(path.join(runDir, 'train.py'), FIX);
  });
  afterEach(async () => {
    await deleteKeysWithPrefix(prefix);
    await rm(root, { recursive: true, force: true });
  });
  afterAll(() => redis.disconnect());

  const history = (pinMaxBytes = 1e9, isRoot = false) =>
    createCheckpointHistory({ redis, prefix, runDir: (id) => path.join(root, id), pinMaxBytes, isRoot });

  function save(step: number, target: string, mode: 'in-place' | 'rename' | 'directory', content: string) {
    const { SHEPHERD_RUN_DIR: _ignored, ...inherited } = process.env;
    const result = spawnSync('python3', ['-c', SAVE, String(step), target, mode, content], {
      cwd: runDir,
      env: { ...inherited, PYTHONPATH: PYTHON_RUNTIME_DIR, SHEPHERD_RUN_DIR: runDir, SHEPHERD_LAUNCH: '1' },
      encoding: 'utf8',
      timeout: 10_000,
    });
    expect(result.stderr).toBe('');
  }

  /** The NaN began at step 25: choose, pin and record the fix, as triage does when it builds the card. */
  async function proposeFix(checkpoints: CheckpointHistory) {
    await checkpoints.noteIncident(runId, NAN);
    const choice = await checkpoints.chooseResumePoint(runId, NAN);
    const text = await checkpoints.pinFix(runId, {
      script: FIX,
      fix: 1,
      maxFixes: 3,
      kind: 'nan',
      resume: choice,
    });
    const chosen = (await checkpoints.list(runId)).find((entry) => entry.step === choice.entry?.step);
    return { choice, text, pinned: chosen?.pinned };
  }

  const resumeJson = async () =>
    JSON.parse(await readFile(path.join(runDir, 'resume.json'), 'utf8')) as Record<string, unknown>;
  const launchFix = (checkpoints: CheckpointHistory) =>
    checkpoints.beforeLaunch(testRunMeta(runId, { launchCount: 2 }));

  it('copies a single checkpoint file the script rewrites in place, and resumes from the copy after the stop rewrote it', async () => {
    const checkpoints = history();
    save(10, 'ckpt.pt', 'in-place', 'weights of step 10');
    save(20, 'ckpt.pt', 'in-place', 'weights of step 20');
    const { text, pinned } = await proposeFix(checkpoints);
    expect(text).toMatch(
      /^Shepherd pinned a copy of it at \.shepherd\/pinned\/launch1-step20-\d+\/ckpt\.pt, so /,
    );
    expect(pinned).toBeDefined();
    expect((await stat(pinned ?? '')).ino).not.toBe((await stat(path.join(runDir, 'ckpt.pt'))).ino);

    // The SIGTERM handler of the stop for the fix rewrites ckpt.pt in place with the NaN state.
    save(27, 'ckpt.pt', 'in-place', 'NaN weights of step 27');
    const note = await launchFix(checkpoints);
    expect(note).toBe(
      `it resumes from the step-20 checkpoint (pinned by Shepherd before the stop: ${path.relative(runDir, pinned ?? '')})`,
    );
    expect(await resumeJson()).toMatchObject({ step: 20, checkpoint: pinned, pinned_from: 'ckpt.pt' });
    expect(await readFile(pinned ?? '', 'utf8')).toBe('weights of step 20');
  });

  it('hard-links a checkpoint written to a new file per step; the link outlives the script deleting it', async () => {
    const checkpoints = history();
    save(10, 'ckpt/step10.pt', 'rename', 'weights of step 10');
    save(20, 'ckpt/step20.pt', 'rename', 'weights of step 20');
    const { text, pinned } = await proposeFix(checkpoints);
    expect(text).toMatch(
      /^Shepherd pinned it \(a hard link at \.shepherd\/pinned\/launch1-step20-\d+\/step20\.pt; /,
    );
    const original = await stat(path.join(runDir, 'ckpt/step20.pt'));
    expect((await stat(pinned ?? '')).ino).toBe(original.ino);
    expect(original.nlink).toBe(2);

    await rm(path.join(runDir, 'ckpt/step20.pt')); // a "keep the last N" rotation
    expect(await launchFix(checkpoints)).toMatch(
      /^it resumes from the step-20 checkpoint \(pinned by Shepherd/,
    );
    expect(await resumeJson()).toMatchObject({ step: 20, checkpoint: pinned, pinned_from: 'ckpt/step20.pt' });
    expect(await readFile(pinned ?? '', 'utf8')).toBe('weights of step 20');
  });

  it('notices a hard-linked checkpoint rewritten in place after the stop and resumes from the one before', async () => {
    const checkpoints = history();
    save(10, 'ckpt/step10.pt', 'rename', 'weights of step 10');
    save(20, 'ckpt/step20.pt', 'rename', 'weights of step 20');
    const { pinned } = await proposeFix(checkpoints);
    // A careless stop handler writes its NaN state into the newest step file, in place: the link sees it.
    await writeFile(path.join(runDir, 'ckpt/step20.pt'), 'NaN weights written over step 20');
    expect(await readFile(pinned ?? '', 'utf8')).toBe('NaN weights written over step 20');

    expect(await launchFix(checkpoints)).toBe(
      'the step-20 checkpoint was overwritten while the run stopped; resuming from the step-10 checkpoint instead (ckpt/step10.pt)',
    );
    expect(await resumeJson()).toMatchObject({ step: 10, checkpoint: 'ckpt/step10.pt' });
    const output = await readFile(path.join(runDir, 'output.log'), 'utf8');
    expect(output).toContain(
      '=== Shepherd: the step-20 checkpoint was overwritten while the run stopped; resuming from the checkpoint at step 10 (ckpt/step10.pt) ===',
    );
  });

  it('pins a checkpoint folder recursively (links for checkpoint-N/, copies for a folder saved again)', async () => {
    const checkpoints = history();
    save(10, 'out/latest', 'directory', 'step 10');
    save(20, 'out/checkpoint-20', 'directory', 'step 20');
    const { text, pinned } = await proposeFix(checkpoints);
    expect(text).toMatch(/a hard link at \.shepherd\/pinned\/launch1-step20-\d+\/checkpoint-20;/);
    await rm(path.join(runDir, 'out/checkpoint-20'), { recursive: true }); // save_total_limit rotation
    await launchFix(checkpoints);
    expect(await resumeJson()).toMatchObject({ step: 20, checkpoint: pinned });
    expect(await readFile(path.join(pinned ?? '', 'sub', 'optimizer.pt'), 'utf8')).toBe(
      `step 20 ${path.join('sub', 'optimizer.pt')}`,
    );
    expect((await readdir(pinned ?? '')).sort()).toEqual(['model.safetensors', 'sub', 'trainer_state.json']);

    // A folder saved again under the same name is copied, file by file.
    save(22, 'out/latest', 'directory', 'step 22');
    const second = await checkpoints.pinFix(runId, {
      script: FIX,
      fix: 2,
      maxFixes: 3,
      kind: 'nan',
      resume: await checkpoints.chooseResumePoint(runId, { launch: 1, kind: 'nan', firstBadStep: 23 }),
    });
    expect(second).toMatch(/pinned a copy of it at \.shepherd\/pinned\/launch1-step22-\d+\/latest,/);
    const copy = (await checkpoints.list(runId)).find((entry) => entry.step === 22)?.pinned ?? '';
    const [pinnedFile, originalFile] = await Promise.all([
      stat(path.join(copy, 'model.safetensors')),
      stat(path.join(runDir, 'out/latest/model.safetensors')),
    ]);
    expect(pinnedFile.ino).not.toBe(originalFile.ino);
  });

  it('does not pin past SHEPHERD_PIN_MAX_GB, says so, and after the stop restarts from scratch', async () => {
    const checkpoints = history(5);
    save(20, 'ckpt.pt', 'in-place', 'weights of step 20');
    const { text, pinned } = await proposeFix(checkpoints);
    expect(text).toBe(
      'It is not pinned: it is 18 bytes, over SHEPHERD_PIN_MAX_GB (5 bytes per run); if the run changes it before the fix starts, the fix resumes from an earlier checkpoint or starts over, and says so.',
    );
    expect(pinned).toBeUndefined();
    // The helper keeps its own files in .shepherd (the pids for hang dumps); nothing was pinned there.
    expect(await readdir(path.join(runDir, '.shepherd', 'pinned')).catch(() => [])).toEqual([]);

    save(27, 'ckpt.pt', 'in-place', 'NaN weights of step 27');
    expect(await launchFix(checkpoints)).toBe(
      'the step-20 checkpoint was overwritten while the run stopped; restarting from scratch',
    );
    await expect(stat(path.join(runDir, 'resume.json'))).rejects.toThrow(/ENOENT/);
    expect(await readFile(path.join(runDir, 'output.log'), 'utf8')).toContain(
      '=== Shepherd: the step-20 checkpoint was overwritten while the run stopped; starting over ===',
    );
  });

  it('resumes from the unpinned file when nothing touched it, and says where from', async () => {
    const checkpoints = history(0);
    save(20, 'ckpt/step20.pt', 'rename', 'weights of step 20');
    const { text } = await proposeFix(checkpoints);
    expect(text).toMatch(/^It is not pinned: it is 18 bytes, SHEPHERD_PIN_MAX_GB is 0; /);
    expect(await launchFix(checkpoints)).toBe('it resumes from the step-20 checkpoint (ckpt/step20.pt)');
    expect(await resumeJson()).toMatchObject({ step: 20, checkpoint: 'ckpt/step20.pt' });
  });

  it('replaces an older pin unless resume.json still points into it, and releases all pins at the end', async () => {
    const checkpoints = history();
    save(20, 'ckpt.pt', 'in-place', 'weights of step 20');
    const first = (await proposeFix(checkpoints)).pinned ?? '';
    await launchFix(checkpoints); // resume.json now points at the first pin
    save(22, 'ckpt.pt', 'in-place', 'weights of step 22');
    await writeFile(path.join(runDir, 'resume.json'), JSON.stringify({ step: 20, checkpoint: first }));
    const later = { launch: 1, kind: 'nan', firstBadStep: 23 };
    const fix = async () =>
      checkpoints.pinFix(runId, {
        script: FIX,
        fix: 2,
        maxFixes: 3,
        kind: 'nan',
        resume: await checkpoints.chooseResumePoint(runId, later),
      });
    await fix();
    const pinnedSteps = async () =>
      (await checkpoints.list(runId))
        .filter((entry) => entry.pinned !== undefined)
        .map((entry) => entry.step);
    expect(await pinnedSteps()).toEqual([20, 22]);

    // Once the script saved again (the helper rewrote resume.json), the first pin is no longer needed.
    save(22, 'ckpt.pt', 'in-place', 'weights of step 22, saved again');
    await fix();
    expect(await pinnedSteps()).toEqual([22]);
    await expect(stat(first)).rejects.toThrow(/ENOENT/);

    await checkpoints.releasePins(runId);
    await expect(stat(path.join(runDir, '.shepherd', 'pinned'))).rejects.toThrow(/ENOENT/);
    expect(await pinnedSteps()).toEqual([]);
  });

  it('pins nothing through a symbolic link planted in place of .shepherd', async () => {
    const outside = await mkdtemp(path.join(os.tmpdir(), 'shepherd-outside-'));
    try {
      save(20, 'ckpt.pt', 'in-place', 'weights of step 20');
      // The run replaces the folder the helper made with a link to elsewhere.
      await rm(path.join(runDir, '.shepherd'), { recursive: true, force: true });
      await symlink(outside, path.join(runDir, '.shepherd'));
      const { text } = await proposeFix(history());
      expect(text).toMatch(/^It is not pinned \(\.shepherd is not a plain folder\); /);
      expect(await readdir(outside)).toEqual([]);
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });

  it.skipIf(process.getuid?.() !== 0)('as root, pins only files of the run user', async () => {
    save(20, 'ckpt.pt', 'in-place', 'weights of step 20');
    await chown(path.join(runDir, 'ckpt.pt'), 65534, 65534);
    const { text } = await proposeFix(history(1e9, true));
    expect(text).toMatch(/^It is not pinned \(ckpt\.pt does not belong to the run's user\); /);
  });
});

/** Saves a step-named checkpoint, crashes when told to, and once relaunched waits to be stopped. */
const CRASHES_AFTER_SAVE = `import os, time, shepherd
if shepherd.resume_info()["checkpoint"] is None:
    os.makedirs("ckpt", exist_ok=True)
    with open("ckpt/step20.pt", "w") as handle:
        handle.write("weights of step 20")
    shepherd.save_checkpoint(20, "ckpt/step20.pt")
    while not os.path.exists("crash-now"):
        time.sleep(0.05)
    raise SystemExit("crashed")
while True:
    time.sleep(0.05)
`;

describe('pins and the end of a run', () => {
  let harness: Harness;
  beforeEach(async () => {
    harness = await createHarness();
  });
  afterEach(async () => {
    await harness.cleanup();
  });

  it('keeps the pins of a failed run (a fix may relaunch it) and removes them when the run is stopped', async () => {
    const { service, store, checkpoints } = harness.runtime;
    const created = await service.createRun({
      name: 'pinned-end',
      script: CRASHES_AFTER_SAVE,
      gpus: 0,
      threadId: 'web:local:pins',
      requester: ALICE,
    });
    await service.approve(created.id, BOB);
    await waitFor(async () => (await checkpoints.list(created.id)).length > 0);
    await checkpoints.noteIncident(created.id, NAN);
    const resume = await checkpoints.chooseResumePoint(created.id, NAN);
    const text = await checkpoints.pinFix(created.id, {
      script: FIX,
      fix: 1,
      maxFixes: 3,
      kind: 'nan',
      resume,
    });
    expect(text).toMatch(/^Shepherd pinned it \(a hard link/);
    const pinnedFolder = path.join(store.runDir(created.id), '.shepherd', 'pinned');

    await writeFile(path.join(store.runDir(created.id), 'crash-now'), '');
    await waitFor(async () => {
      await service.refresh();
      return (await harness.runtime.find(created.id)).status === 'failed';
    });
    expect(await readdir(pinnedFolder)).toHaveLength(1);

    await service.resume(created.id, BOB);
    await service.stop(created.id, BOB);
    await expect(stat(pinnedFolder)).rejects.toThrow(/ENOENT/);
    expect((await checkpoints.list(created.id)).every((entry) => entry.pinned === undefined)).toBe(true);
  });
});
