"""Callbacks that give Shepherd exact metrics, checkpoints and a clean pause without print parsing.

    from shepherd.integrations.hf import ShepherdCallback          # Hugging Face Trainer
    from shepherd.integrations.lightning import ShepherdCallback   # PyTorch Lightning

Both import without transformers or Lightning installed (they subclass the real base class when it is
importable, else ``object``), so a script can add them unconditionally.
"""
