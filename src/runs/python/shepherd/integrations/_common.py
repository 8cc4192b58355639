"""Pieces shared by the framework callbacks (stdlib only)."""

import math
import signal
import threading

import shepherd


def numeric_metrics(values):
    """The entries of ``values`` that are numbers (tensors and numpy scalars via ``.item()``), NaN included."""
    metrics = {}
    for key, value in (values or {}).items():
        if key in ("step", "ts"):
            continue
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            metrics[str(key)] = value
            continue
        item = getattr(value, "item", None)
        if callable(item):
            try:
                inner = item()
            except Exception:
                continue
            if isinstance(inner, (int, float)) and not isinstance(inner, bool):
                metrics[str(key)] = inner
    return metrics


def is_finite_number(value):
    return isinstance(value, (int, float)) and not math.isnan(value) and not math.isinf(value)


class StopRequest:
    """SIGTERM (Shepherd's pause or stop) asks the training loop to save and stop at the next step,
    instead of exiting from inside the signal handler."""

    def __init__(self):
        self.requested = False
        self.installed = False

    def install(self):
        if self.installed or threading.current_thread() is not threading.main_thread():
            return
        try:
            signal.signal(signal.SIGTERM, self._on_signal)
            self.installed = True
        except (ValueError, OSError):
            pass

    def _on_signal(self, signum, frame):
        if not self.requested:
            self.requested = True
            shepherd.log("received SIGTERM; saving a checkpoint and stopping at the end of this step")
