/**
 * The training and evaluation scripts the `--eval` tests share across backends (Slurm, Kubernetes, HF Jobs),
 * so each backend is held to the same run: four steps, then an eval that waits for the test's go.
 */

/** Four healthy steps through the helper, then a clean finish. */
export const EVAL_TRAIN_PY = `import time, shepherd
for step in range(1, 5):
    shepherd.log_metrics(step=step, loss=1.0 / step)
    time.sleep(0.05)
shepherd.finish()
`;

/** Waits for the test's go (so `evaluating` can be seen), prints an eval dict and logs one more number. */
export const EVAL_PY = `import os, sys, time, shepherd
release = sys.argv[1]
deadline = time.time() + 120
while not os.path.exists(release) and time.time() < deadline:
    time.sleep(0.1)
print("evaluating in %s" % os.getcwd(), flush=True)
print({'eval_loss': 0.25, 'eval_accuracy': 0.875}, flush=True)
shepherd.log_eval(eval_bleu=31.5)
`;
