"""Hugging Face Trainer callback: exact metrics, checkpoints and a clean pause for Shepherd.

    from shepherd.integrations.hf import ShepherdCallback
    trainer = Trainer(..., callbacks=[ShepherdCallback()])
    trainer.train(resume_from_checkpoint=ShepherdCallback.resume_checkpoint())

- on_log: every dict the Trainer logs (loss, grad_norm, learning_rate, eval_*, train_runtime, ...) goes to
  ``shepherd.log_metrics`` at the Trainer's global step;
- on_save: the checkpoint folder (``<output_dir>/checkpoint-<step>``) goes to ``shepherd.save_checkpoint``,
  so a relaunch or fix resumes from it;
- Shepherd's pause or stop (SIGTERM): the Trainer saves a checkpoint and stops cleanly at the end of the
  current step (``control.should_save`` / ``control.should_training_stop``), then the run exits 0;
- on_train_end: ``shepherd.finish``.
Only the main process (``state.is_world_process_zero``) writes, so several ranks don't log twice.
"""

import os

import shepherd
from shepherd.integrations._common import StopRequest, numeric_metrics

try:  # pragma: no cover - depends on what is installed
    from transformers import TrainerCallback as _Base
except Exception:  # transformers missing or broken: the callback still works with duck-typed objects
    _Base = object

__all__ = ["ShepherdCallback"]

CHECKPOINT_PREFIX = "checkpoint"


def _is_main(state):
    return bool(getattr(state, "is_world_process_zero", True))


class ShepherdCallback(_Base):
    """A ``transformers.TrainerCallback`` reporting to Shepherd (see the module docstring)."""

    def __init__(self, handle_stop=True):
        self._stop = StopRequest()
        self._handle_stop = handle_stop

    @staticmethod
    def resume_checkpoint():
        """The checkpoint folder Shepherd recorded, if it still exists: pass to ``trainer.train(resume_from_checkpoint=...)``."""
        path = shepherd.resume_info().get("checkpoint")
        return path if isinstance(path, str) and os.path.isdir(path) else None

    def on_init_end(self, args, state, control, **kwargs):
        if self._handle_stop:
            self._stop.install()
        return control

    def on_train_begin(self, args, state, control, **kwargs):
        if self._handle_stop:
            self._stop.install()
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not _is_main(state):
            return control
        metrics = numeric_metrics(logs)
        if metrics:
            shepherd.log_metrics(step=int(getattr(state, "global_step", 0) or 0), **metrics)
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if self._stop.requested:
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_save(self, args, state, control, **kwargs):
        if not _is_main(state):
            return control
        step = int(getattr(state, "global_step", 0) or 0)
        folder = os.path.join(str(getattr(args, "output_dir", ".")), "{}-{}".format(CHECKPOINT_PREFIX, step))
        shepherd.save_checkpoint(step, folder)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if _is_main(state):
            shepherd.finish(stopped=self._stop.requested)
        return control
