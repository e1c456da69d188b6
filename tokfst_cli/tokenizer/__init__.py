"""The tokenizer: a neutral model of a Hugging Face tokenizer.json, and Hugging Face itself as the oracle."""
import importlib
import warnings


def __getattr__(name: str):
    """``tokfst_cli.tokenizer.load`` and the rest of release 0.1's module, now :mod:`.model` (with a warning)."""

    if name.startswith("__"):
        raise AttributeError(name)
    model = importlib.import_module(f"{__name__}.model")
    if not hasattr(model, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"{__name__}.{name} is deprecated; use {__name__}.model.{name}", DeprecationWarning, stacklevel=2)
    return getattr(model, name)
