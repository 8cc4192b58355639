"""Shepherd launch wrapper (stdlib only): runs train.py as a child and records how it ended.

Usage: python3 -u shepherd_launcher.py <launch number> <script> [<deadline epoch s> <grace s>]
       python3 -u shepherd_launcher.py <launch number> --command <deadline epoch s> <grace s> <dir>
           [--container <remove argv as JSON>] -- <argv ...>

The second form runs any command (torchrun, accelerate, bash launch.sh, ...) without a shell in <dir>;
every process it starts is a descendant of the launcher, so pause and stop reach all ranks.

With --container the command is a container engine client (`docker run` / `podman run` with --init and
--sig-proxy): the training processes live in the container, which the engine may keep outside this
process tree. Signals then go to the client alone, which relays them once into the container (signalling
the container's processes directly as well would deliver SIGTERM twice, re-entering the script's
checkpoint handler). Where SIGKILL is due, and after the run ends, <remove argv> removes the container,
so nothing the run started outlives the exit status.

It lives as long as the training process, but only waits: it never trains. It survives SIGTERM sent to
the process group (the child gets the same signal and saves its checkpoint), then writes
exit_status.json atomically, so the exit code is known even if the bot restarted meanwhile.

Nothing escapes it: it is a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so a grandchild that called
setsid() and was orphaned is re-parented to it rather than to init. A SIGTERM is forwarded to every
descendant outside the process group, and when the child ends every descendant left is killed and
reaped before the exit status is written.

The run's time limit is enforced here too, so it holds while the bot is down: at the deadline the
run gets SIGTERM (it may save a checkpoint), SIGKILL after the grace period, and the exit status says
`timeLimit: true`.

Shepherd starts it with -S (no site-packages: it needs the standard library only), and it imports what it
needs only once the training child runs (json, tempfile, threading), so little start-up stands between
the Approve click and the script's first line.
"""

import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36

_terminated = False
_child = None
_container_remove = None


def _become_subreaper():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl failed")
        return True
    except (OSError, AttributeError) as error:
        print("[shepherd] warning: cannot become a child subreaper ({}); descendants that leave the "
              "process group may survive".format(error), file=sys.stderr, flush=True)
        return False


def _process_table():
    """{pid: (ppid, pgid, state)} of every process, from /proc."""
    table = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open("/proc/{}/stat".format(entry), "rb") as handle:
                stat = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split(" ")
        try:
            table[int(entry)] = (int(fields[1]), int(fields[2]), fields[0])
        except (IndexError, ValueError):
            continue
    return table


def _descendants(table=None):
    """Live (non-zombie) descendants of this process, found through the parent links."""
    table = _process_table() if table is None else table
    children = {}
    for pid, (ppid, _pgid, _state) in table.items():
        children.setdefault(ppid, []).append(pid)
    found = []
    pending = [os.getpid()]
    while pending:
        for pid in children.get(pending.pop(), []):
            pending.append(pid)
            if table[pid][2] != "Z":
                found.append(pid)
    return found


def _signal_all(pids, signum):
    for pid in pids:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def _reap_orphans():
    """Collect zombies re-parented to us (never the training child: Popen must see its status)."""
    table = _process_table()
    for pid, (ppid, _pgid, state) in table.items():
        if ppid == os.getpid() and state == "Z" and (_child is None or pid != _child.pid):
            try:
                os.waitpid(pid, os.WNOHANG)
            except OSError:
                pass


def _kill_descendants():
    """SIGKILL every descendant until none is left; orphans of killed ones come back to us (subreaper)."""
    for _ in range(50):
        left = _descendants()
        if not left:
            break
        _signal_all(left, signal.SIGKILL)
        time.sleep(0.05)
        _reap_orphans()
    _reap_orphans()


def _outside_group(pids):
    table = _process_table()
    group = os.getpgrp()
    return [pid for pid in pids if pid in table and table[pid][1] != group]


def _on_signal(signum, frame):
    global _terminated
    if signum == signal.SIGTERM:
        _terminated = True
        if _container_remove is not None:
            # The engine client is in our group and has the signal already; it relays it inside.
            return
        # The group has the signal already; descendants that left it (setsid) get it from us.
        _signal_all(_outside_group(_descendants()), signal.SIGTERM)


def _remove_container():
    """Remove the run's container (already gone is the usual, quiet case)."""
    try:
        result = subprocess.run(_container_remove, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        print("[shepherd] could not remove the run's container: {}".format(error), file=sys.stderr, flush=True)
        return
    output = result.stdout.decode("utf-8", "replace").strip()
    if result.returncode != 0 and "no such container" not in output.lower():
        print("[shepherd] could not remove the run's container: {}".format(output), file=sys.stderr, flush=True)


def _write_status(status):
    import json
    import tempfile

    fd, temporary = tempfile.mkstemp(prefix=".exit_status.", dir=".")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(status, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, "exit_status.json")


def _wait(deadline, grace):
    """Wait for the child, enforcing the time limit. Returns (exit code, whether the limit was hit)."""
    limited = False
    kill_at = None
    while True:
        code = _child.poll()
        if code is not None:
            return code, limited
        now = time.time()
        if deadline > 0 and now >= deadline and not limited:
            limited = True
            print("[shepherd] time limit reached; sending SIGTERM", file=sys.stderr, flush=True)
            if _container_remove is None:
                _signal_all(_descendants(), signal.SIGTERM)
            else:
                _child.send_signal(signal.SIGTERM)
            kill_at = now + grace
        if kill_at is not None and now >= kill_at:
            print("[shepherd] the run ignored SIGTERM for {} s; sending SIGKILL".format(grace),
                  file=sys.stderr, flush=True)
            if _container_remove is not None:
                _remove_container()
            _signal_all(_descendants(), signal.SIGKILL)
            kill_at = None
        _reap_orphans()
        time.sleep(0.2)


def _write_json(name, value):
    import json
    import tempfile

    fd, temporary = tempfile.mkstemp(prefix="." + name + ".", dir=".")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(value, handle)
    os.replace(temporary, name)


def _evaluate(deadline, grace):
    """Run SHEPHERD_EVAL_COMMAND (a shell command) in the run directory after training exited 0.

    Its output goes to eval.log and to our stdout (output.log); evaluation.json says running, then how it
    ended. The training exit code stays the launcher's: an evaluation failure does not undo the training.
    Returns whether the time limit was hit during the evaluation.
    """
    global _child
    command = os.environ.get("SHEPHERD_EVAL_COMMAND") or ""
    if not command.strip():
        return False
    started = time.time()
    _write_json("evaluation.json", {"status": "running", "startedAt": started})
    print("=== evaluation: {} ===".format(command), flush=True)
    with open("eval.log", "ab") as log:
        try:
            _child = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as error:
            print("[shepherd] could not start the evaluation: {}".format(error), file=sys.stderr, flush=True)
            _write_json("evaluation.json", {"status": "failed", "exitCode": 127, "startedAt": started,
                                            "endedAt": time.time()})
            return False
        # A thread copies the output while _wait enforces the time limit, as for training.
        def copy():
            for line in iter(_child.stdout.readline, b""):
                log.write(line)
                log.flush()
                sys.stdout.buffer.write(line)
                sys.stdout.flush()

        import threading

        copier = threading.Thread(target=copy, daemon=True)
        copier.start()
        code, limited = _wait(deadline, grace)
        copier.join(timeout=5)
    _kill_descendants()
    status = "passed" if code == 0 else "failed"
    _write_json("evaluation.json", {"status": status, "exitCode": code if code >= 0 else 128 - code,
                                    "startedAt": started, "endedAt": time.time()})
    print("=== evaluation ended: exit code {} ===".format(code), flush=True)
    return limited


def _run_args():
    """Extra arguments for train.py (a sweep trial's --key value pairs), JSON in SHEPHERD_RUN_ARGS."""
    raw = os.environ.get("SHEPHERD_RUN_ARGS") or ""
    if not raw.strip():
        return []
    import json

    try:
        values = json.loads(raw)
    except ValueError:
        return []
    return [str(value) for value in values] if isinstance(values, list) else []


def _command(words):
    """(cwd, argv, container remove argv) from `<dir> [--container <json>] -- <argv ...>`, or None."""
    remove = None
    rest = words[1:]
    if rest[:1] == ["--container"] and len(rest) > 2:
        import json

        remove = [str(word) for word in json.loads(rest[1])]
        rest = rest[2:]
    if len(words) < 1 or rest[:1] != ["--"] or len(rest) < 2:
        return None
    return words[0], rest[1:], remove


def main():
    global _child, _container_remove
    launch = int(sys.argv[1])
    deadline = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    grace = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
    command = _command(sys.argv[5:]) if sys.argv[2] == "--command" else None
    if command is not None:
        cwd, argv, _container_remove = command
    else:
        cwd = None
        argv = [sys.executable, "-u", sys.argv[2]]
    script = " ".join(argv)
    _become_subreaper()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    try:
        _child = subprocess.Popen(argv + _run_args(), cwd=cwd, stdin=subprocess.DEVNULL)
    except OSError as error:
        print("[shepherd] could not start {}: {}".format(script, error), file=sys.stderr, flush=True)
        _write_status({"launch": launch, "exitCode": 127, "signal": None, "terminated": _terminated})
        return 127
    if _terminated:
        # SIGTERM arrived while the child was being spawned and may have missed it.
        _child.send_signal(signal.SIGTERM)
    code, limited = _wait(deadline, grace)
    # Whatever the script left behind (dataloader workers, setsid daemons) ends with it.
    _kill_descendants()
    if _container_remove is not None:
        # The client is gone, but a container may not be (a client killed outright leaves Docker's running).
        _remove_container()
    if code == 0 and not _terminated and not limited and _container_remove is None:
        limited = _evaluate(deadline, grace)
    status = {
        "launch": launch,
        "exitCode": code if code >= 0 else None,
        "signal": signal.Signals(-code).name if code < 0 else None,
        "terminated": _terminated,
        "timeLimit": limited,
        "ts": round(time.time(), 3),
    }
    _write_status(status)
    how = "exit code {}".format(code) if code >= 0 else "signal {}".format(status["signal"])
    why = " (time limit)" if limited else " (after SIGTERM)" if _terminated else ""
    print("=== launch {} ended: {}{} ===".format(launch, how, why), flush=True)
    if os.getpgrp() == os.getpid():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.killpg(os.getpgrp(), signal.SIGKILL)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
