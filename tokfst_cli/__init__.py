"""tokfst: compile and inspect tokenizer automata.

The theory: Cognetta & Okazaki 2024 (tokenization as finite-state transduction) and the pipeline
A -> P -> S -> C of Pitfalls 2025 (``docs/references.md``). The public API is re-exported here
and loaded on first use, so ``import tokfst_cli`` (or its alias ``import tokfst``) costs
nothing until a name is touched::

    import tokfst_cli as tokfst
    model = tokfst.load_tokenizer("gpt2")
    result = tokfst.build(model, "[0-9]{4}-[0-9]{2}-[0-9]{2}", canonical=True)
    matcher = tokfst.Matcher(result.decoder(), eos=model.eos_id)

The package is layered (``docs/architecture.md``): each subpackage imports only the layers
below it. The module paths of release 0.1 (``tokfst_cli.constraint`` stays, ``tokfst_cli.matcher``,
``tokfst_cli.logits``, ``tokfst_cli.marginal``, ``tokfst_cli.sample``, ...) still import, with a
DeprecationWarning naming the new path (:mod:`tokfst_cli.compat`).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from tokfst_cli import compat as _compat
from tokfst_cli.support.meta import __version__ as __version__
from tokfst_cli.support.meta import signal_line as signal_line

_EXPORTS = {  # public name -> (module, attribute)
    "build": ("tokfst_cli.pipeline", "build"),
    "Limits": ("tokfst_cli.pipeline", "Limits"),
    "Result": ("tokfst_cli.pipeline", "Result"),
    "load_tokenizer": ("tokfst_cli.tokenizer.model", "load"),
    "TokenizerModel": ("tokfst_cli.tokenizer.model", "TokenizerModel"),
    "load": ("tokfst_cli.constraint", "load"),
    "lazy": ("tokfst_cli.constraint", "lazy"),
    "Decoder": ("tokfst_cli.constraint", "Decoder"),
    "Matcher": ("tokfst_cli.decoding.matcher", "Matcher"),
    "generate": ("tokfst_cli.decoding.matcher", "generate"),
    "pack": ("tokfst_cli.decoding.matcher", "pack"),
    "Generated": ("tokfst_cli.decoding.matcher", "Generated"),
    "allocate_token_bitmask": ("tokfst_cli.decoding.matcher", "allocate_token_bitmask"),
    "apply_token_bitmask_inplace": ("tokfst_cli.decoding.matcher", "apply_token_bitmask_inplace"),
    "BatchMatcher": ("tokfst_cli.decoding.batched", "BatchMatcher"),
    "fill_next_token_bitmasks": ("tokfst_cli.decoding.batched", "fill_next_token_bitmasks"),
    "compile_schema": ("tokfst_cli.schema.compile", "compile_schema"),
    "serialize": ("tokfst_cli.schema.serialize", "serialize"),
    "compile_grammar": ("tokfst_cli.grammar.load", "compile_grammar"),
    "compile_json": ("tokfst_cli.grammar.schema", "compile_json"),
    "Encoder": ("tokfst_cli.encoder.encode", "Encoder"),
    "compile": ("tokfst_cli.sources", "compile"),
    "Filters": ("tokfst_cli.filters.compose", "Filters"),
    "TokfstError": ("tokfst_cli.errors", "TokfstError"),
    "InputError": ("tokfst_cli.errors", "InputError"),
    "LimitError": ("tokfst_cli.errors", "LimitError"),
    "EmptyLanguageError": ("tokfst_cli.errors", "EmptyLanguageError"),
    "DisallowedTokenError": ("tokfst_cli.errors", "DisallowedTokenError"),
    "UsageError": ("tokfst_cli.errors", "UsageError"),
    "TokenTypeError": ("tokfst_cli.errors", "TokenTypeError"),
    "TokenRangeError": ("tokfst_cli.errors", "TokenRangeError"),
    "ForeignStateError": ("tokfst_cli.errors", "ForeignStateError"),
    "DeadEnd": ("tokfst_cli.errors", "DeadEnd"),
    "InternalError": ("tokfst_cli.errors", "InternalError"),
}

__all__ = sorted([*_EXPORTS, "__version__", "signal_line"])

_compat.install()


class _Package(types.ModuleType):
    """This package's module type: importing an old module path whose name is also a public name
    (``tokfst_cli.lazy``, the module of 0.1) must not replace the public name (the function
    ``tokfst_cli.lazy``) on the package, as the import system would (``importlib.import_module``
    still returns the module)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType) and name in _compat.MOVED:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    """A public name, imported on first use; a moved module of release 0.1, with a warning."""
    if name in _EXPORTS:
        module, attr = _EXPORTS[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if name in _compat.MOVED:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

