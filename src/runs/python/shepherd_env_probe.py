"""Shepherd environment probe (stdlib only): what a run's Python environment is made of, as one JSON line.

Usage: python shepherd_env_probe.py <timeout seconds per probe>

Run by Shepherd beside a launch, with the run's interpreter and environment variables, so `pip freeze`
lists the run's packages rather than the bot's. Every probe has its own timeout and a failed probe is
reported in "errors" instead of failing the rest: it must never stand in the way of a launch.
"""

import json
import platform
import subprocess
import sys


def _run(argv, timeout):
    completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if completed.returncode != 0:
        tail = (completed.stderr or completed.stdout).strip().splitlines()[-1:] or ["exit %d" % completed.returncode]
        raise RuntimeError(tail[0][:300])
    return completed.stdout


_TORCH = "import json, torch; print(json.dumps({'torch': torch.__version__, 'cuda': getattr(torch.version, 'cuda', None)}))"


def main():
    timeout = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    report = {"python": platform.python_version(), "executable": sys.executable, "errors": {}}
    try:
        lines = _run([sys.executable, "-m", "pip", "freeze", "--all"], timeout).splitlines()
        report["pipFreeze"] = [line for line in lines if line.strip() != ""]
    except Exception as error:  # noqa: BLE001 - any failure is reported, never raised
        report["errors"]["pipFreeze"] = str(error)
    try:
        found = json.loads(_run([sys.executable, "-c", _TORCH], timeout).strip().splitlines()[-1])
        report["torch"] = str(found["torch"])
        if found.get("cuda"):
            report["torchCuda"] = str(found["cuda"])
    except Exception as error:  # noqa: BLE001
        report["errors"]["torch"] = str(error)
    try:
        smi = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], timeout)
        gpus = [line.strip() for line in smi.splitlines() if line.strip() != ""]
        report["gpus"] = [line.split(",")[0].strip() for line in gpus]
        if gpus:
            report["driver"] = gpus[0].split(",")[-1].strip()
        header = _run(["nvidia-smi"], timeout)
        marker = header.find("CUDA Version:")
        if marker != -1:
            report["cuda"] = header[marker + len("CUDA Version:"):].split()[0]
    except Exception as error:  # noqa: BLE001
        report["errors"]["nvidiaSmi"] = str(error)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
