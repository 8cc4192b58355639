"""PyTorch Lightning callback: exact metrics, checkpoints and a clean pause for Shepherd.

    from shepherd.integrations.lightning import ShepherdCallback
    trainer = L.Trainer(..., callbacks=[ShepherdCallback()])
    trainer.fit(model, ckpt_path=ShepherdCallback.resume_checkpoint())

- every ``log_every_n_steps`` training batches and after each validation, the trainer's
  ``callback_metrics`` (what ``self.log`` recorded) go to ``shepherd.log_metrics`` at ``global_step``;
- each checkpoint ModelCheckpoint writes (its ``last_model_path`` / ``best_model_path``) goes to
  ``shepherd.save_checkpoint``;
- Shepherd's pause or stop (SIGTERM): at the end of the current batch a checkpoint is saved to
  ``<default_root_dir>/checkpoints/shepherd-pause-step=<N>.ckpt`` and the trainer stops cleanly;
- on_train_end: ``shepherd.finish``.
Only global rank 0 writes.
"""

import os

import shepherd
from shepherd.integrations._common import StopRequest, numeric_metrics

try:  # pragma: no cover - depends on what is installed
    from lightning.pytorch.callbacks import Callback as _Base
except Exception:
    try:
        from pytorch_lightning.callbacks import Callback as _Base
    except Exception:
        _Base = object

__all__ = ["ShepherdCallback"]


def _is_main(trainer):
    return int(getattr(trainer, "global_rank", 0) or 0) == 0


class ShepherdCallback(_Base):
    """A Lightning ``Callback`` reporting to Shepherd (see the module docstring)."""

    def __init__(self, every_n_steps=None, handle_stop=True):
        self._every = every_n_steps
        self._stop = StopRequest()
        self._handle_stop = handle_stop
        self._last_logged_step = None
        self._seen_model_path = None

    @staticmethod
    def resume_checkpoint():
        """The checkpoint file Shepherd recorded, if it still exists: pass to ``trainer.fit(ckpt_path=...)``."""
        path = shepherd.resume_info().get("checkpoint")
        return path if isinstance(path, str) and os.path.isfile(path) else None

    def _log(self, trainer):
        step = int(getattr(trainer, "global_step", 0) or 0)
        metrics = numeric_metrics(getattr(trainer, "callback_metrics", None))
        if metrics:
            shepherd.log_metrics(step=step, **metrics)
            self._last_logged_step = step

    def _sync_checkpoint(self, trainer):
        checkpoint = getattr(trainer, "checkpoint_callback", None)
        path = getattr(checkpoint, "last_model_path", "") or getattr(checkpoint, "best_model_path", "")
        # Only a path ModelCheckpoint has not reported before: an older one must not replace a pause save.
        if path and path != self._seen_model_path:
            self._seen_model_path = path
            shepherd.save_checkpoint(int(getattr(trainer, "global_step", 0) or 0), str(path))

    def on_train_start(self, trainer, pl_module):
        # After Lightning registered its own signal handlers, so a pause saves instead of aborting.
        if self._handle_stop:
            self._stop.install()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not _is_main(trainer):
            return
        every = self._every or int(getattr(trainer, "log_every_n_steps", 50) or 50)
        step = int(getattr(trainer, "global_step", 0) or 0)
        if step % every == 0 and step != self._last_logged_step:
            self._log(trainer)
        self._sync_checkpoint(trainer)
        if self._stop.requested and not getattr(trainer, "should_stop", False):
            root = str(getattr(trainer, "default_root_dir", ".") or ".")
            path = os.path.join(root, "checkpoints", "shepherd-pause-step={}.ckpt".format(step))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            trainer.save_checkpoint(path)
            shepherd.save_checkpoint(step, path)
            trainer.should_stop = True

    def on_validation_end(self, trainer, pl_module):
        if _is_main(trainer) and not getattr(trainer, "sanity_checking", False):
            self._log(trainer)
            self._sync_checkpoint(trainer)

    def on_train_end(self, trainer, pl_module):
        if _is_main(trainer):
            self._sync_checkpoint(trainer)
            shepherd.finish(stopped=self._stop.requested)
