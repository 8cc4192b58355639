import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseMetricLine } from '../../src/runs/file-tail.js';
import { PYTHON_RUNTIME_DIR } from '../../src/runs/records/run-files.js';
import { ALICE, BOB, createHarness, type Harness, waitFor } from './harness.js';

/*
 * The Hugging Face Trainer and Lightning callbacks of the Python helper. Neither library can be installed
 * here, so the training loops below are objects shaped like theirs (the hooks, `args`, `state`,
 * `control`, `trainer` attributes the callbacks read), run by a real python3.
 */

function runPython(code: string, environment: Record<string, string>, extraPath = '') {
  const { SHEPHERD_RUN_DIR: _ignored, ...inherited } = process.env;
  return spawnSync('python3', ['-c', code], {
    env: { ...inherited, PYTHONPATH: `${PYTHON_RUNTIME_DIR}${extraPath}`, ...environment },
    encoding: 'utf8',
    timeout: 20_000,
  });
}

/** A Trainer-shaped loop: the hooks in the Trainer's order, honouring control.should_save / _stop. */
const HF_LOOP = `import os, time, types
from shepherd.integrations.hf import ShepherdCallback

class Control:
    should_save = False
    should_training_stop = False

def train(output_dir, steps, sleep=0.0, kill_at=None, callback=None):
    callback = callback or ShepherdCallback()
    args = types.SimpleNamespace(output_dir=output_dir, save_steps=5, logging_steps=2)
    state = types.SimpleNamespace(global_step=0, is_world_process_zero=True, max_steps=steps)
    control = Control()
    callback.on_init_end(args, state, control)
    callback.on_train_begin(args, state, control)
    for step in range(1, steps + 1):
        state.global_step = step
        if step == kill_at:
            os.kill(os.getpid(), 15)
        control = callback.on_step_end(args, state, control)
        if step % args.logging_steps == 0:
            loss = float("nan") if step >= 12 else 2.0 / step
            callback.on_log(args, state, control, logs={"loss": loss, "grad_norm": 1.5, "learning_rate": 5e-05, "epoch": step / steps})
        if step % args.save_steps == 0 or control.should_save:
            os.makedirs(os.path.join(output_dir, "checkpoint-%d" % step), exist_ok=True)
            callback.on_save(args, state, control)
            control.should_save = False
        if control.should_training_stop:
            break
        time.sleep(sleep)
    callback.on_log(args, state, control, logs={"train_runtime": 1.25, "train_loss": 0.5, "epoch": 1.0, "note": "text"})
    callback.on_train_end(args, state, control)
    return state.global_step
`;

describe('shepherd.integrations', () => {
  let directory: string;
  beforeEach(async () => {
    directory = await mkdtemp(path.join(os.tmpdir(), 'shepherd-integrations-'));
  });
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('imports without transformers or Lightning, and subclasses the real bases when they exist', async () => {
    const bare = runPython(
      `from shepherd.integrations.hf import ShepherdCallback as H
from shepherd.integrations.lightning import ShepherdCallback as L
print(H.__mro__[1].__name__, L.__mro__[1].__name__)`,
      {},
    );
    expect(bare.stderr).toBe('');
    expect(bare.stdout.trim()).toBe('object object');

    const fakes = path.join(directory, 'site');
    await mkdir(path.join(fakes, 'transformers'), { recursive: true });
    await writeFile(path.join(fakes, 'transformers', '__init__.py'), 'class TrainerCallback:\n    pass\n');
    await mkdir(path.join(fakes, 'lightning', 'pytorch', 'callbacks'), { recursive: true });
    await writeFile(path.join(fakes, 'lightning', '__init__.py'), '');
    await writeFile(path.join(fakes, 'lightning', 'pytorch', '__init__.py'), '');
    await writeFile(
      path.join(fakes, 'lightning', 'pytorch', 'callbacks', '__init__.py'),
      'class Callback:\n    pass\n',
    );
    const real = runPython(
      `import transformers, lightning.pytorch.callbacks as callbacks
from shepherd.integrations.hf import ShepherdCallback as H
from shepherd.integrations.lightning import ShepherdCallback as L
print(issubclass(H, transformers.TrainerCallback), issubclass(L, callbacks.Callback))`,
      {},
      `:${fakes}`,
    );
    expect(real.stderr).toBe('');
    expect(real.stdout.trim()).toBe('True True');
  });

  it('HF: on_log → log_metrics at the global step, on_save → save_checkpoint, on_train_end → finish', async () => {
    const result = runPython(`${HF_LOOP}\ntrain(${JSON.stringify(path.join(directory, 'out'))}, 14)`, {
      SHEPHERD_RUN_DIR: directory,
    });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const lines = (await readFile(path.join(directory, 'metrics.jsonl'), 'utf8')).trim().split('\n');
    const records = lines.map((line) => parseMetricLine(line));
    expect(records.map((record) => record?.step)).toEqual([2, 4, 6, 8, 10, 12, 14, 14]);
    expect(records[0]?.values).toEqual({ loss: 1, grad_norm: 1.5, learning_rate: 5e-5, epoch: 2 / 14 });
    expect(records[5]?.values.loss).toBeNaN();
    expect(records[7]?.values).toEqual({ train_runtime: 1.25, train_loss: 0.5, epoch: 1 });
    const resume = JSON.parse(await readFile(path.join(directory, 'resume.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(resume).toMatchObject({ step: 10, checkpoint: path.join(directory, 'out', 'checkpoint-10') });
    const finish = JSON.parse(await readFile(path.join(directory, 'finish.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(finish).toMatchObject({ step: 14, stopped: false });
    // resume_checkpoint() hands the folder back to trainer.train(resume_from_checkpoint=...).
    const resumed = runPython(
      'from shepherd.integrations.hf import ShepherdCallback\nprint(ShepherdCallback.resume_checkpoint())',
      {
        SHEPHERD_RUN_DIR: directory,
      },
    );
    expect(resumed.stdout.trim()).toBe(path.join(directory, 'out', 'checkpoint-10'));
  });

  it('HF: SIGTERM makes the Trainer save and stop at the end of the step, then exit 0', async () => {
    const result = runPython(
      `${HF_LOOP}\nprint("stopped at", train(${JSON.stringify(path.join(directory, 'out'))}, 100, kill_at=7))`,
      {
        SHEPHERD_RUN_DIR: directory,
      },
    );
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('received SIGTERM; saving a checkpoint and stopping');
    expect(result.stdout).toContain('stopped at 7');
    const resume = JSON.parse(await readFile(path.join(directory, 'resume.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(resume).toMatchObject({ step: 7, checkpoint: path.join(directory, 'out', 'checkpoint-7') });
    const finish = JSON.parse(await readFile(path.join(directory, 'finish.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(finish).toMatchObject({ stopped: true });
  });

  it('Lightning: callback_metrics every log_every_n_steps and after validation, checkpoints, clean pause', async () => {
    const result = runPython(
      `import os, types
from shepherd.integrations.lightning import ShepherdCallback

class Tensor:
    def __init__(self, value): self.value = value
    def item(self): return self.value

class Trainer:
    def __init__(self, root):
        self.global_step = 0
        self.global_rank = 0
        self.log_every_n_steps = 2
        self.default_root_dir = root
        self.should_stop = False
        self.sanity_checking = False
        self.callback_metrics = {}
        self.checkpoint_callback = types.SimpleNamespace(last_model_path="", best_model_path="")
    def save_checkpoint(self, path):
        open(path, "w").write("weights")

root = ${JSON.stringify(path.join(directory, 'lightning'))}
trainer = Trainer(root)
callback = ShepherdCallback()
callback.on_train_start(trainer, None)
for batch in range(1, 100):
    trainer.global_step = batch
    trainer.callback_metrics = {"train_loss": Tensor(1.0 / batch), "lr": 1e-3, "flag": True}
    if batch == 9:
        os.kill(os.getpid(), 15)
    if batch == 4:
        trainer.callback_metrics = {"train_loss": Tensor(0.25), "val_loss": Tensor(float("nan"))}
        callback.on_validation_end(trainer, None)
        trainer.checkpoint_callback.last_model_path = os.path.join(root, "epoch=0-step=4.ckpt")
    callback.on_train_batch_end(trainer, None, None, None, batch)
    if trainer.should_stop:
        break
callback.on_train_end(trainer, None)
print("stopped at", trainer.global_step)`,
      { SHEPHERD_RUN_DIR: directory },
    );
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('stopped at 9');
    const records = (await readFile(path.join(directory, 'metrics.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((line) => parseMetricLine(line));
    expect(records.map((record) => record?.step)).toEqual([2, 4, 6, 8]);
    expect(records[0]?.values).toEqual({ train_loss: 0.5, lr: 1e-3 });
    expect(records[1]?.values.val_loss).toBeNaN();
    const pausePath = path.join(directory, 'lightning', 'checkpoints', 'shepherd-pause-step=9.ckpt');
    expect(await readFile(pausePath, 'utf8')).toBe('weights');
    const resume = JSON.parse(await readFile(path.join(directory, 'resume.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(resume).toMatchObject({ step: 9, checkpoint: pausePath });
    const finish = JSON.parse(await readFile(path.join(directory, 'finish.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(finish).toMatchObject({ stopped: true });
  });
});

describe('the HF callback under a real Shepherd pause', () => {
  let harness: Harness;
  beforeEach(async () => {
    harness = await createHarness();
  });
  afterEach(async () => {
    await harness.cleanup();
  });

  it('pause saves a checkpoint folder through the Trainer and the run ends as paused, not crashed', async () => {
    const { service } = harness.runtime;
    const created = await service.createRun({
      name: 'hf-callback',
      script: `${HF_LOOP}\ntrain("out", 10_000, sleep=0.05)\n`,
      gpus: 0,
      threadId: 'web:l:t',
      requester: ALICE,
    });
    await service.approve(created.id, BOB);
    await waitFor(
      async () => (await harness.runFile(created.id, 'metrics.jsonl').catch(() => '')).split('\n').length > 3,
    );
    const paused = await service.pause(created.id, BOB);
    expect(paused.status).toBe('paused');
    const status = await harness.runtime.status(created.id);
    const step = status.resume?.step as number;
    expect(status.resume?.checkpoint).toBe(`out/checkpoint-${step}`);
    const finish = JSON.parse(await harness.runFile(created.id, 'finish.json')) as Record<string, unknown>;
    expect(finish).toMatchObject({ stopped: true });
    expect(await harness.runFile(created.id, 'output.log')).toContain('saving a checkpoint and stopping');
  });
});
