"""Shepherd launch wrapper (stdlib only): runs train.py as a child and records how it ended.

Usage: python3 -u shepherd_launcher.py <launch number> <script>
       python3 -u shepherd_launcher.py <launch number> --cwd <dir> -- <argv ...>

The second form runs any command (torchrun, accelerate, bash launch.sh, ...) without a shell in <dir>;
every process it starts stays in the launcher's process group, so pause and stop reach all ranks.

It lives as long as the training process, but only waits: it never trains. It survives SIGTERM sent to
the process group (the child gets the same signal and saves its checkpoint), then writes
exit_status.json atomically, so the exit code is known even if the bot restarted meanwhile. Finally it
kills anything left in its process group (dataloader workers, stray children): a run never leaves a
process behind.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

_terminated = False
_child = None


def _on_signal(signum, frame):
    global _terminated
    if signum == signal.SIGTERM:
        _terminated = True
    # The signal went to the whole group, so the child has it too; just keep waiting for the child.


def _write_status(status):
    fd, temporary = tempfile.mkstemp(prefix=".exit_status.", dir=".")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(status, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, "exit_status.json")


def main():
    global _child
    launch = int(sys.argv[1])
    if len(sys.argv) > 5 and sys.argv[2] == "--cwd" and sys.argv[4] == "--":
        cwd = sys.argv[3]
        argv = sys.argv[5:]
    else:
        cwd = None
        argv = [sys.executable, "-u", sys.argv[2]]
    script = " ".join(argv)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    try:
        _child = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL)
    except OSError as error:
        print("[shepherd] could not start {}: {}".format(script, error), file=sys.stderr, flush=True)
        _write_status({"launch": launch, "exitCode": 127, "signal": None, "terminated": _terminated})
        return 127
    if _terminated:
        # SIGTERM arrived while the child was being spawned and may have missed it.
        _child.send_signal(signal.SIGTERM)
    code = _child.wait()
    status = {
        "launch": launch,
        "exitCode": code if code >= 0 else None,
        "signal": signal.Signals(-code).name if code < 0 else None,
        "terminated": _terminated,
        "ts": round(time.time(), 3),
    }
    _write_status(status)
    how = "exit code {}".format(code) if code >= 0 else "signal {}".format(status["signal"])
    print("=== launch {} ended: {}{} ===".format(launch, how, " (after SIGTERM)" if _terminated else ""), flush=True)
    if os.getpgrp() == os.getpid():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.killpg(os.getpgrp(), signal.SIGKILL)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
