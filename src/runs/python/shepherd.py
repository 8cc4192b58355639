"""Shepherd runtime helper for training scripts (stdlib only, one file).

Shepherd puts this directory on PYTHONPATH of every run, so a script does ``import shepherd``.

    shepherd.log_metrics(step=10, loss=0.42, lr=3e-4)   # one line in metrics.jsonl
    shepherd.log("warming up")                          # timestamped line in output.log
    shepherd.save_checkpoint(10, "ckpt/step10.pt")      # remembered in resume.json
    shepherd.resume_info()                              # {"step": 10, "checkpoint": "ckpt/step10.pt", ...}
    shepherd.on_stop(lambda: save(step))                # SIGTERM (pause/stop): save, then exit 0
    shepherd.finish()                                   # flush and write the final marker
    shepherd.save_model("out/final", base_model="gpt2") # the final model directory (Push to Hub)
    shepherd.log_eval(accuracy=0.91, eval_loss=0.3)     # evaluation results (from an --eval command)
    shepherd.preflight()                                # True during Shepherd's CPU pre-flight
    shepherd.alert("Low accuracy", "acc 0.1 < 0.5")     # an alert card in the run's thread (like wandb.alert)

Hugging Face Trainer and Lightning scripts can add a callback instead (metrics, checkpoints, clean pause):

    from shepherd.integrations.hf import ShepherdCallback         # Trainer(..., callbacks=[ShepherdCallback()])
    from shepherd.integrations.lightning import ShepherdCallback  # L.Trainer(callbacks=[ShepherdCallback()])

Without Shepherd (no SHEPHERD_RUN_DIR in the environment) everything prints to stdout and no file is
written, so the same script runs on a laptop. Under Shepherd without a run directory (an HF job, where
Shepherd reads only the job's log) save_model also prints ``[shepherd:model] {...}`` and log_eval prints
``[eval] {...}``: Shepherd writes model.json and eval_results.jsonl from those lines. With SHEPHERD_METRICS_STDOUT=1 (Kubernetes pods) metrics
lines are printed as ``[metrics] {...}`` as well as written, because Shepherd may only see the pod's log.

Pre-flight: before a GPU job's approval card, Shepherd may run the script on CPU with
SHEPHERD_PREFLIGHT=1, CUDA_VISIBLE_DEVICES= and SHEPHERD_PREFLIGHT_STEPS=N; log_metrics then ends the
process cleanly (exit 0) after N steps. Scripts may check preflight() to shrink work (a tiny batch).

Files in $SHEPHERD_RUN_DIR:
  metrics.jsonl  {"ts": <epoch seconds>, "step": <int>, "<name>": <number>, ...} per line; NaN and
                 infinities are written as Python's json writes them (NaN, Infinity, -Infinity).
  resume.json    last save_checkpoint() call, written atomically; never wiped by a relaunch (Shepherd
                 rewrites it when an approved fix must resume from an earlier, healthy checkpoint).
  checkpoints.jsonl  one line per save_checkpoint(): {"step", "checkpoint", "ts", "launch", "size",
                 "mtime", ...extra}; Shepherd's checkpoint history.
  finish.json    {"ts", "step", "stopped"} written by finish(); stopped=true when ended by SIGTERM;
                 "wallTime": true when ended by the signal Slurm sends before the job's time limit.
  model.json     last save_model(): {"path" (absolute), "info", "step", "ts"}, written atomically.
  eval_results.jsonl  {"ts", "<name>": <number>, ...} per log_eval() call.
  alerts.jsonl   {"ts", "title", "text", "level", "step", "wait"} per alert() that was not a repeat.
  .shepherd/stack-signal.jsonl  {"pid", "signal"} per process that imported this module.

Hang dumps: on import (under Shepherd) every thread's stack is written to stderr (output.log) on SIGUSR2,
by faulthandler, so it works even when the main thread is stuck in C code (NCCL, a lock). Shepherd sends
it when a run stops making progress and shows the main thread's innermost frames in the stall alert.

Wall-time limits: on Slurm, Shepherd submits with --signal=B:USR1@<grace> and SHEPHERD_STOP_SIGNAL=USR1;
SIGUSR1 then runs the on_stop() callbacks like SIGTERM, so a checkpoint is saved before the time limit
and the next segment of a wall-time chain resumes from it.
"""

import atexit
import datetime
import faulthandler
import json
import os
import signal
import sys
import tempfile
import time
import traceback

__all__ = [
    "alert",
    "config",
    "finish",
    "log",
    "log_eval",
    "log_metrics",
    "on_stop",
    "preflight",
    "resume_info",
    "run_dir",
    "run_id",
    "save_checkpoint",
    "save_model",
]

# Make this module a package too, so ``shepherd.integrations.hf`` / ``.lightning`` import from the
# ``shepherd/`` folder next to this file (a plain module with ``__path__`` is a package to the import system).
__path__ = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "shepherd")]

_RUN_DIR = os.environ.get("SHEPHERD_RUN_DIR") or None
_RUN_ID = os.environ.get("SHEPHERD_RUN_ID") or None
# Set where Shepherd reads the run's log rather than its files (a Kubernetes pod without a shared volume):
# every metrics line is printed too, and Shepherd parses it from the log.
_METRICS_STDOUT = os.environ.get("SHEPHERD_METRICS_STDOUT") == "1"
_RESERVED = ("ts", "step")

_metrics_file = None
_last_step = None
_warned = set()
_memory_resume = None
_stop_callbacks = []
_stopping = False
_finished = False
_preflight_logged = 0
_alerted = {}
_ALERT_LEVELS = ("info", "warn", "error")


def _preflight_steps():
    if os.environ.get("SHEPHERD_PREFLIGHT") != "1":
        return 0
    try:
        return max(0, int(os.environ.get("SHEPHERD_PREFLIGHT_STEPS", "0")))
    except ValueError:
        return 0


_PREFLIGHT_STEPS = _preflight_steps()


def preflight():
    """True when this is Shepherd's short CPU pre-flight rather than the real run."""
    return _PREFLIGHT_STEPS > 0


def run_dir():
    """The run directory, or None when running outside Shepherd."""
    return _RUN_DIR


def run_id():
    """The Shepherd run id, or None when running outside Shepherd."""
    return _RUN_ID


def config():
    """The run's config dict (``config`` of start_training, passed as SHEPHERD_RUN_CONFIG), or {}."""
    raw = os.environ.get("SHEPHERD_RUN_CONFIG")
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        _warn("SHEPHERD_RUN_CONFIG is not valid JSON; ignoring it")
        return {}
    return value if isinstance(value, dict) else {}


def _now_iso():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def _warn(message):
    print("[shepherd] warning: " + message, file=sys.stderr, flush=True)


def log(message):
    """Print a timestamped line to stdout (which Shepherd appends to output.log)."""
    print("[{}] {}".format(_now_iso(), message), flush=True)


def _as_number(value):
    # bool is an int subclass but "True" is not a metric; numpy/torch scalars expose .item().
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    item = getattr(value, "item", None)
    if callable(item):
        try:
            inner = item()
        except Exception:
            return None
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return inner
    return None


def _metrics():
    global _metrics_file
    if _metrics_file is None:
        _metrics_file = open(os.path.join(_RUN_DIR, "metrics.jsonl"), "a", encoding="utf-8")
    return _metrics_file


def log_metrics(step=None, **metrics):
    """Append one metrics line. Non-numeric values are reported in output.log and left out of the line."""
    global _last_step
    if step is None:
        step = 0 if _last_step is None else _last_step + 1
    number = _as_number(step)
    if number is None:
        _warn("log_metrics step {!r} is not a number; line skipped".format(step))
        return
    step = int(number) if float(number).is_integer() else number
    line = {"ts": round(time.time(), 3), "step": step}
    for key, value in metrics.items():
        if key in _RESERVED:
            _warn("metric name {!r} is reserved; value left out of metrics.jsonl".format(key))
            continue
        numeric = _as_number(value)
        if numeric is None:
            if key not in _warned:
                _warned.add(key)
                shown = repr(value)
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                _warn(
                    "metric {!r} at step {} is not a number ({}: {}); left out of metrics.jsonl "
                    "(further non-numeric values of {!r} are not reported)".format(
                        key, step, type(value).__name__, shown, key
                    )
                )
            continue
        line[key] = numeric
    text = json.dumps(line)
    _last_step = step
    if _RUN_DIR is None or _METRICS_STDOUT:
        print("[metrics] " + text, flush=True)
    if _RUN_DIR is None:
        return
    handle = _metrics()
    handle.write(text + "\n")
    handle.flush()
    _count_preflight_step()


def _seconds(value):
    # wait_duration as wandb.alert takes it: seconds, or a datetime.timedelta.
    total = getattr(value, "total_seconds", None)
    if callable(total):
        return float(total())
    return float(value)


def alert(title, text="", level="warn", wait_duration=300):
    """Post an alert card into the run's thread (as wandb.alert / trackio.alert do).

    ``level`` is "info", "warn" or "error". The same ``title`` again within ``wait_duration`` seconds
    (a number or a timedelta; default 5 minutes) is not posted. Without Shepherd the alert is printed.
    Returns True when the alert was recorded, False when it was a suppressed repeat.
    """
    title = str(title).strip()
    if not title:
        _warn("alert() needs a title; alert skipped")
        return False
    level = str(level).lower()
    if level == "warning":
        level = "warn"
    if level not in _ALERT_LEVELS:
        _warn("alert level {!r} is not one of info, warn, error; using warn".format(level))
        level = "warn"
    try:
        wait = max(0.0, _seconds(wait_duration))
    except (TypeError, ValueError):
        _warn("alert wait_duration {!r} is not a number of seconds; using 300".format(wait_duration))
        wait = 300.0
    now = time.monotonic()
    last = _alerted.get(title)
    if last is not None and now - last < wait:
        return False
    _alerted[title] = now
    text = "" if text is None else str(text)
    if _RUN_DIR is None:
        print("[shepherd] alert ({}): {}{}".format(level, title, ": " + text if text else ""), flush=True)
        return True
    record = {"ts": round(time.time(), 3), "title": title, "text": text, "level": level,
              "step": _last_step, "wait": wait}
    try:
        with open(os.path.join(_RUN_DIR, "alerts.jsonl"), "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=str) + "\n")
    except OSError as error:
        _warn("could not record the alert {!r}: {}".format(title, error))
        return False
    return True


def _count_preflight_step():
    global _preflight_logged
    if _PREFLIGHT_STEPS <= 0:
        return
    _preflight_logged += 1
    if _preflight_logged < _PREFLIGHT_STEPS:
        return
    print("[shepherd] pre-flight: {} steps done; stopping".format(_preflight_logged), flush=True)
    finish()
    sys.stdout.flush()
    sys.stderr.flush()
    # os._exit, not sys.exit: a training loop's broad `except` cannot swallow it, and data loader
    # workers do not keep the process up.
    os._exit(0)


def _write_json_atomic(path, value):
    directory = os.path.dirname(path)
    fd, temporary = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(value, handle, default=str)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def save_checkpoint(step, path=None, **extra):
    """Record that ``step`` is complete and its checkpoint is at ``path``; resume_info() returns it."""
    global _memory_resume
    state = dict(extra)
    state.update({"step": step, "checkpoint": path, "ts": round(time.time(), 3)})
    if _RUN_DIR is None:
        _memory_resume = state
        log("checkpoint saved at step {}{}".format(step, "" if path is None else ": " + str(path)))
        return
    _write_json_atomic(os.path.join(_RUN_DIR, "resume.json"), state)
    _append_history(state)
    log("checkpoint saved at step {}{}".format(step, "" if path is None else ": " + str(path)))


def save_model(path, **info):
    """Record ``path`` as the run's final model directory (weights, config, tokenizer) for Push to Hub.

    ``info`` may say what the model card should: base_model, datasets, library_name, license, tags, ...
    """
    full = os.path.abspath(str(path))
    if not os.path.isdir(full):
        _warn("save_model: {} is not a directory; not recorded".format(full))
        return
    resume = resume_info()
    marker = {"path": full, "info": info, "ts": round(time.time(), 3)}
    if resume.get("step") is not None:
        marker["step"] = resume["step"]
    if _RUN_DIR is None:
        if _RUN_ID is not None:
            # Under Shepherd without its run directory (an HF job): the log Shepherd follows carries model.json.
            print("[shepherd:model] " + json.dumps(marker, default=str), flush=True)
        log("model saved: {}".format(full))
        return
    _write_json_atomic(os.path.join(_RUN_DIR, "model.json"), marker)
    log("model saved: {}".format(full))


def log_eval(**numbers):
    """Record evaluation results (one line in eval_results.jsonl); non-numbers are skipped with a warning."""
    record = {}
    for name, value in numbers.items():
        number = _as_number(value)
        if number is None:
            _warn("log_eval: {}={!r} is not a number; skipped".format(name, value))
            continue
        record[str(name)] = number
    if not record:
        return
    line = json.dumps(dict(record, ts=round(time.time(), 3)))
    if _RUN_DIR is None:
        print("[eval] " + line, flush=True)
        return
    with open(os.path.join(_RUN_DIR, "eval_results.jsonl"), "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def _append_history(state):
    entry = dict(state)
    launch = os.environ.get("SHEPHERD_LAUNCH")
    if launch and launch.isdigit():
        entry["launch"] = int(launch)
    path = state.get("checkpoint")
    if isinstance(path, str):
        # Size and mtime let Shepherd tell later whether the file was overwritten by a later save.
        try:
            info = os.stat(path if os.path.isabs(path) else os.path.join(os.getcwd(), path))
            entry["size"] = info.st_size
            entry["mtime"] = round(info.st_mtime, 3)
        except OSError:
            pass
    try:
        with open(os.path.join(_RUN_DIR, "checkpoints.jsonl"), "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, default=str) + "\n")
    except OSError as error:
        _warn("could not record the checkpoint in checkpoints.jsonl: {}".format(error))


def resume_info():
    """{"step": last completed step or None, "checkpoint": path or None, ...extra from save_checkpoint}."""
    state = None
    if _RUN_DIR is None:
        state = _memory_resume
    else:
        try:
            with open(os.path.join(_RUN_DIR, "resume.json"), encoding="utf-8") as handle:
                state = json.load(handle)
        except FileNotFoundError:
            state = None
        except ValueError:
            _warn("resume.json is unreadable; starting from scratch")
            state = None
    result = {"step": None, "checkpoint": None}
    if isinstance(state, dict):
        result.update(state)
    return result


def _handle_stop(signum, frame):
    global _stopping
    if _stopping:
        return
    _stopping = True
    wall_time = signum == _WALL_TIME_SIGNAL
    log("received {}{}; saving state before stopping".format(
        signal.Signals(signum).name, " (the job's time limit is near)" if wall_time else ""))
    failed = False
    for callback in list(_stop_callbacks):
        try:
            callback()
        except Exception:
            failed = True
            traceback.print_exc()
    if wall_time:
        finish(stopped=True, wallTime=True)
    else:
        finish(stopped=True)
    # Exit 0 (or 1 if the stop callback failed); Shepherd's launcher records that SIGTERM was received,
    # which is how "stopped by Shepherd" is told apart from a crash.
    sys.exit(1 if failed else 0)


def on_stop(callback):
    """Call ``callback`` on SIGTERM (pause/stop from Shepherd), then exit cleanly with code 0."""
    _stop_callbacks.append(callback)
    signal.signal(signal.SIGTERM, _handle_stop)
    return callback


def finish(stopped=False, **summary):
    """Flush metrics and write the final marker (finish.json). Safe to call more than once."""
    global _finished
    if _metrics_file is not None:
        _metrics_file.flush()
    if _finished:
        return
    _finished = True
    marker = dict(summary)
    marker.update({"ts": round(time.time(), 3), "step": _last_step, "stopped": bool(stopped)})
    if _RUN_DIR is None:
        print("[shepherd] finished: " + json.dumps(marker, default=str), flush=True)
        return
    _write_json_atomic(os.path.join(_RUN_DIR, "finish.json"), marker)


def _wall_time_signal():
    name = os.environ.get("SHEPHERD_STOP_SIGNAL") or ""
    return getattr(signal, "SIG" + name, None) if name in ("USR1", "USR2", "TERM") else None


_WALL_TIME_SIGNAL = _wall_time_signal()


def _install_signals():
    """Under Shepherd: the hang-dump signal (SIGUSR2) and the wall-time stop signal (SIGUSR1 on Slurm)."""
    if _RUN_DIR is None or _PREFLIGHT_STEPS > 0:
        return
    if _WALL_TIME_SIGNAL is not None and _WALL_TIME_SIGNAL != signal.SIGUSR2:
        try:
            signal.signal(_WALL_TIME_SIGNAL, _handle_stop)
        except ValueError:
            pass  # imported outside the main thread: the default stays
    usr2 = getattr(signal, "SIGUSR2", None)
    if usr2 is None or signal.getsignal(usr2) not in (signal.SIG_DFL, None):
        return  # the script uses SIGUSR2 itself; leave it alone
    try:
        faulthandler.register(usr2, file=sys.stderr, all_threads=True)
    except (ValueError, RuntimeError, OSError, AttributeError):
        return
    try:
        os.makedirs(os.path.join(_RUN_DIR, ".shepherd"), exist_ok=True)
        with open(os.path.join(_RUN_DIR, ".shepherd", "stack-signal.jsonl"), "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"pid": os.getpid(), "signal": "SIGUSR2"}) + "\n")
    except OSError as error:
        _warn("could not record the hang-dump pid: {}".format(error))


_install_signals()


@atexit.register
def _close():
    if _metrics_file is not None:
        try:
            _metrics_file.flush()
            _metrics_file.close()
        except OSError:
            pass
