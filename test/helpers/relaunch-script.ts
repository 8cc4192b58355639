import { readFileSync } from 'node:fs';

/**
 * A stdlib training script for the automatic-relaunch tests and benchmark: a step every `sleepS`, a
 * checkpoint (its own file per step) every 10 steps through the `shepherd` helper, resumed from
 * `shepherd.resume_info()` with a line that says where it started. `raiseAt` makes it raise a
 * ValueError at that step (a bug in user code).
 */
export function trainScript(options: { steps: number; raiseAt?: number; sleepS?: number }): string {
  return `import json, os, time, shepherd
LAST = ${options.steps}
RAISE_AT = ${options.raiseAt ?? 'None'}
info = shepherd.resume_info()
step = 0
if info["checkpoint"]:
    with open(info["checkpoint"]) as handle:
        step = json.load(handle)["step"]
    shepherd.log("resumed from step %d" % step)
else:
    shepherd.log("starting from scratch")
os.makedirs("ckpt", exist_ok=True)
while step < LAST:
    step += 1
    if RAISE_AT is not None and step == RAISE_AT:
        raise ValueError("bad batch at step %d" % step)
    shepherd.log_metrics(step=step, loss=1.0 / step)
    if step % 10 == 0:
        path = "ckpt/step%d.json" % step
        with open(path, "w") as handle:
            json.dump({"step": step}, handle)
        shepherd.save_checkpoint(step, path)
    time.sleep(${options.sleepS ?? 0.05})
shepherd.finish()
`;
}

/** The training process under a local run's launcher (its only child), or undefined while there is none. */
export function trainingChild(launcherPid: number): number | undefined {
  try {
    const children = readFileSync(`/proc/${launcherPid}/task/${launcherPid}/children`, 'utf8').trim();
    const first = Number(children.split(/\s+/)[0]);
    return Number.isInteger(first) && first > 0 ? first : undefined;
  } catch {
    return undefined;
  }
}
