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

PACKAGE = "tokfst_cli"
ALIAS = "tokfst"

MOVED = {  # old module under tokfst_cli -> its module now
    "artifacts": "support.files",
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


class _Alias(importlib.abc.Loader):
    """Loads a module name as another, already importable module."""

    def __init__(self, target: str, warn: str | None):
        self.target, self.warn = target, warn

    def create_module(self, spec):
        if self.warn:
            warnings.warn(self.warn, DeprecationWarning, stacklevel=4)
        return importlib.import_module(self.target)

    def exec_module(self, module) -> None:
        """Nothing to run: the target module ran when it was imported."""


class _Finder(importlib.abc.MetaPathFinder):
    """Maps ``tokfst_cli.<old>`` to its new module and ``tokfst.<x>`` to ``tokfst_cli.<x>``."""

    def find_spec(self, fullname: str, path=None, target=None):
        head, _, rest = fullname.partition(".")
        if head == PACKAGE and rest:
            first, _, tail = rest.partition(".")
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
