"""Shepherd's start of a remote job (stdlib only). Shepherd sends this program as `python3 -u -c <program>`
and the run's files as the remaining arguments: base64 of zlib-compressed JSON, cut into pieces because
one argument may not pass 128 KiB on Linux. It writes the files into a fresh directory, puts Shepherd's
helper on PYTHONPATH and replaces itself with the training command, so the job's own signals and exit
code are the script's. With a "wrapper" (a run with --eval) it replaces itself with bash running that
script, the training argv as its arguments ("$@"): training, then the evaluation, reported in the log.

Payload: {"files": {relative path: text}, "runtime": relative dir with shepherd.py,
          "command": argv or null (null: run the script with this Python), "script": relative path,
          "args": extra arguments, "cwd": relative working directory, "wrapper": bash script or absent}
"""
import base64
import json
import os
import sys
import tempfile
import zlib

spec = json.loads(zlib.decompress(base64.b64decode("".join(sys.argv[1:]))).decode("utf-8"))
root = os.path.abspath("shepherd-run")
try:
    os.makedirs(root, exist_ok=True)
except OSError:
    root = tempfile.mkdtemp(prefix="shepherd-run-")
for name, text in spec["files"].items():
    target = os.path.join(root, name)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w", encoding="utf-8") as handle:
        handle.write(text)
runtime = os.path.join(root, spec["runtime"])
previous = os.environ.get("PYTHONPATH")
os.environ["PYTHONPATH"] = runtime + (os.pathsep + previous if previous else "")
os.chdir(os.path.join(root, spec.get("cwd") or "."))
argv = spec.get("command") or [sys.executable, "-u", spec["script"]]
argv = argv + spec.get("args", [])
if spec.get("wrapper"):
    argv = ["/bin/bash", "-c", spec["wrapper"], "shepherd-job"] + argv
sys.stdout.flush()
try:
    os.execvp(argv[0], argv)
except OSError as error:
    print("[shepherd] could not start {}: {}".format(argv[0], error), file=sys.stderr, flush=True)
    sys.exit(127)
