"""The module paths of release 0.1, kept for one release: importing one warns and gives the new module.

``tokfst_cli.matcher`` is ``tokfst_cli.decoding.matcher`` (the same module object, so classes
compare equal), after a :class:`DeprecationWarning` that names the new path. ``tokfst.X`` is
``tokfst_cli.X`` for every module, without a warning: ``tokfst`` is the package's short name.
Nothing here imports a layer; it only maps names (a :class:`importlib.abc.MetaPathFinder`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable
from typing import Any

PACKAGE = "tokfst_cli"
ALIAS = "tokfst"

MOVED = {  # old module under tokfst_cli -> its module now (artifacts: see SPLIT)
    "bitset_kernels": "automata.bitset_kernels",
    "bitsets": "automata.bitsets",
    "byte_table": "promotion.byte_table",
    "cache": "support.cache",
    "catalogue": "text.catalogue",
    "check": "analysis.check",
    "counting": "analysis.counting",
    "doctor": "support.doctor",
    "draw": "analysis.draw",
    "fsts": "automata.fsts",
    "groups": "text.groups",
    "guard": "support.guard",
    "healing": "decoding.healing",
    "index": "decoding.index",
    "inspection": "analysis.inspection",
    "label_classes": "automata.label_classes",
    "lazy": "promotion.lazy",
    "lexicon": "promotion.lexicon",
    "logits": "decoding.logits",
    "marginal": "analysis.marginal",
    "matcher": "decoding.matcher",
    "progress": "support.progress",
    "promote": "promotion.promote",
    "reference": "tokenizer.reference",
    "regex": "text.regex",
    "sample": "analysis.sample",
    "steering": "analysis.steering",
    "sugar": "text.sugar",
    "symbols": "automata.symbols",
    "terminals": "text.terminals",
    "trie": "promotion.trie",
    "trie_kernels": "promotion.trie_kernels",
    "utf8": "automata.utf8",
}


SPLIT = {"artifacts": ("support.files", "automata.fst_io", "automata.arrays")}  # old module -> where its names went


def forward(package: str, targets: dict[str, str] | str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for names of release 0.1 that moved: ``targets`` maps a name to the
    submodule of ``package`` holding it now, or is one submodule for every name it has. The name
    is imported on first use, after a DeprecationWarning naming its new place."""

    def __getattr__(name: str) -> Any:
        where = targets if isinstance(targets, str) else targets.get(name)
        if where is None or name.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{package}.{where}")
        if not hasattr(module, name):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        warnings.warn(f"{package}.{name} is deprecated; use {package}.{where}.{name}", DeprecationWarning,
                      stacklevel=2)
        return getattr(module, name)

    return __getattr__


class _Split(importlib.abc.Loader):
    """Loads an old module whose names now live in several modules: a module that forwards each."""

    def __init__(self, targets: tuple[str, ...]):
        self.targets = targets

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        modules = [importlib.import_module(f"{PACKAGE}.{t}") for t in self.targets]
        warnings.warn(f"{module.__name__} is deprecated; its names are in "
                      + ", ".join(m.__name__ for m in modules), DeprecationWarning, stacklevel=4)

        def __getattr__(name: str) -> Any:
            for m in modules:
                if hasattr(m, name):
                    return getattr(m, name)
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

        module.__getattr__ = __getattr__


class _Alias(importlib.abc.Loader):
    """Loads a module name as another, already importable module."""

    def __init__(self, target: str, warn: str | None):
        self.target, self.warn = target, warn

    KEPT = ("__name__", "__spec__", "__loader__", "__package__", "__path__", "__file__")

    def create_module(self, spec):
        if self.warn:
            warnings.warn(self.warn, DeprecationWarning, stacklevel=4)
        module = importlib.import_module(self.target)
        self.saved = {k: getattr(module, k) for k in self.KEPT if hasattr(module, k)}
        return module

    def exec_module(self, module) -> None:
        """Nothing to run (the target module ran when it was imported); put back the attributes
        importlib set from the alias's spec, so the module keeps its own name, spec and path
        (``importlib.resources`` reads them)."""
        for k, v in self.saved.items():
            setattr(module, k, v)


class _Finder(importlib.abc.MetaPathFinder):
    """Maps ``tokfst_cli.<old>`` to its new module and ``tokfst.<x>`` to ``tokfst_cli.<x>``."""

    def find_spec(self, fullname: str, path=None, target=None):
        head, _, rest = fullname.partition(".")
        if head == PACKAGE and rest:
            first, _, tail = rest.partition(".")
            if first in SPLIT and not tail:
                return importlib.machinery.ModuleSpec(fullname, _Split(SPLIT[first]))
            if first in MOVED:
                new = ".".join(filter(None, [PACKAGE, MOVED[first], tail]))
                warn = f"{fullname} is deprecated; import {new}"
                return importlib.machinery.ModuleSpec(fullname, _Alias(new, warn))
        elif head == ALIAS:
            new = ".".join(filter(None, [PACKAGE, rest]))
            return importlib.machinery.ModuleSpec(fullname, _Alias(new, None))
        return None


def install() -> None:
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
