"""The public facade and the module paths of release 0.1: the same objects, a DeprecationWarning for old paths."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import tokfst_cli
from tokfst_cli import compat
from tokfst_cli.automata import arrays
from tokfst_cli.decoding import matcher
from tokfst_cli.filters import compose
from tokfst_cli.schema import compile as schema_compile
from tokfst_cli.tokenizer import model


def _fresh(name: str):
    """Import ``name`` anew (dropping any earlier alias) and return (module, warnings raised)."""
    sys.modules.pop(name, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(name)
    return module, [w for w in caught if issubclass(w.category, DeprecationWarning)]


@pytest.mark.parametrize("old", sorted(compat.MOVED))
def test_every_old_module_path_is_the_new_module_with_a_warning(old):
    module, caught = _fresh(f"tokfst_cli.{old}")
    assert module is importlib.import_module(f"tokfst_cli.{compat.MOVED[old]}")
    assert module.__spec__.name == module.__name__ == f"tokfst_cli.{compat.MOVED[old]}"  # its own, kept
    assert caught and f"tokfst_cli.{compat.MOVED[old]}" in str(caught[0].message)


def test_the_split_artifacts_module_forwards_each_name():
    module, caught = _fresh("tokfst_cli.artifacts")
    assert caught and "support.files" in str(caught[0].message)
    assert module.fst_arrays is arrays.fst_arrays and module.atomic_write.__module__ == "tokfst_cli.support.files"
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


@pytest.mark.parametrize("package, name, new", [
    ("tokfst_cli.tokenizer", "load", model.load),
    ("tokfst_cli.filters", "Filters", compose.Filters),
    ("tokfst_cli.schema", "compile_schema", schema_compile.compile_schema),
])
def test_names_of_old_modules_now_packages_warn_and_forward(package, name, new):
    with pytest.warns(DeprecationWarning, match=f"{package}.{name} is deprecated"):
        assert getattr(importlib.import_module(package), name) is new
    with pytest.raises(AttributeError):
        getattr(importlib.import_module(package), "no_such_name")


def test_facade_names_and_the_tokfst_alias():
    assert set(tokfst_cli.__all__) >= {"build", "load_tokenizer", "Matcher", "compile_schema", "compile_grammar",
                                       "TokfstError", "DeadEnd", "__version__"}
    assert tokfst_cli.Matcher is matcher.Matcher and tokfst_cli.DeadEnd is matcher.DeadEnd
    with pytest.raises(AttributeError):
        tokfst_cli.no_such_name  # noqa: B018
    import tokfst
    import tokfst.decoding.matcher as via_alias

    assert tokfst is tokfst_cli and via_alias is matcher
    assert tokfst_cli.__spec__.name == "tokfst_cli" and tokfst_cli.__spec__.submodule_search_locations
    assert matcher.__spec__.name == "tokfst_cli.decoding.matcher" and matcher.__name__ == "tokfst_cli.decoding.matcher"


def test_importing_the_package_loads_no_layer():
    code = "import sys, tokfst_cli; print(sorted(m for m in sys.modules if m.startswith('tokfst_cli.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == ["tokfst_cli.compat", "tokfst_cli.support", "tokfst_cli.support.meta"]


def test_an_old_module_path_does_not_replace_a_public_name():
    """``tokfst_cli.lazy`` was a module in 0.1 and is the decoder function now: importing the old
    path gives the module, and the package's attribute stays the function (the documentation's
    ``tokfst.lazy(model, ...)`` works in a process that imported the old path first)."""
    import importlib
    import warnings

    import tokfst_cli

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = importlib.import_module("tokfst_cli.lazy")
    assert hasattr(old, "LazyDecoder")
    assert callable(tokfst_cli.lazy) and tokfst_cli.lazy.__module__ == "tokfst_cli.constraint"
