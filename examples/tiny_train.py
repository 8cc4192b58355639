# Tiny CPU "training" (stdlib only, ~45 s): fits y = 3x + 2, logs loss/lr, checkpoints, resumes.
import json, random, time, shepherd

info = shepherd.resume_info()
state = json.load(open(info["checkpoint"])) if info["checkpoint"] else {"w": 0.0, "b": 0.0, "step": 0}
def save():
    json.dump(state, open("checkpoint.json", "w")); shepherd.save_checkpoint(state["step"], "checkpoint.json")
shepherd.on_stop(save)  # pause/stop: checkpoint, then exit cleanly
for step in range(state["step"] + 1, 301):
    lr = 0.05 * (1 - step / 300) + 1e-3
    x = random.uniform(-1, 1); error = state["w"] * x + state["b"] - (3 * x + 2)
    state.update(w=state["w"] - lr * error * x, b=state["b"] - lr * error, step=step)
    shepherd.log_metrics(step=step, loss=error * error, lr=lr)
    if step % 50 == 0: save()
    time.sleep(0.15)
shepherd.finish()
