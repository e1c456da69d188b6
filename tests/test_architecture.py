"""The shape of the package (issue #10): imports run downward, commands stay thin, modules say what they are.

* no library module imports from ``tokfst_cli.cli`` (the commands) or from ``tests``;
* no function in ``tokfst_cli/cli/`` is longer than 60 lines (signature and body: commands parse,
  call the library and write, as OpenFst's ``*-main.cc``);
* every module has a docstring; every pipeline-stage module names its stage and seed section;
* the library never names a command-line flag in an error (the CLI words errors: ``cli/errors.py``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import tokfst_cli

PACKAGE = Path(tokfst_cli.__file__).parent
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
LIBRARY = [p for p in MODULES if "cli" not in p.relative_to(PACKAGE).parts and p.name != "__main__.py"]
STAGES = {  # module -> the pipeline stage its docstring names (tokfst_cli/pipeline.py's drawing)
    "regex.py": "Stage A", "promote.py": "Stage S", "lexicon.py": "Stage S",
    "maxmatch/preprocess.py": "Stage P", "maxmatch/wordtext.py": "Stage P",
    "pretok/build.py": "Stage P", "pretok/split.py": "Stage P", "pretok/charclass.py": "Stage P",
    "pretok/pattern.py": "Stage P", "pretok/marked.py": "Stage P",
    "maxmatch/product.py": "Stages S+C", "maxmatch/composition.py": "Stages S+C", "maxmatch/taho.py": "Stages S+C",
    "bpe/product.py": "Stage C", "bpe/implicit.py": "Stage C", "bpe/explicit.py": "Stage C",
    "bpe/gadgets.py": "Stage C", "bpe/factorized.py": "Stage C", "bpe/canonical.py": "Stage C", "bpe/hf.py": "Stage C",
}


def _name(p: Path) -> str:
    return str(p.relative_to(PACKAGE))


def _imports(path: Path) -> set[str]:
    """Absolute module names imported by ``path`` (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    package = ["tokfst_cli", *path.relative_to(PACKAGE).parent.parts]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join([*base, *(node.module.split(".") if node.module else [])])
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out


@pytest.mark.parametrize("path", LIBRARY, ids=_name)
def test_library_modules_import_neither_commands_nor_tests(path):
    bad = {m for m in _imports(path) if m == "tests" or m.startswith(("tests.", "tokfst_cli.cli"))}
    assert not bad, f"{_name(path)} imports {sorted(bad)}"


def test_the_import_check_sees_relative_imports(tmp_path):
    """The check above resolves ``from ..cli import x`` (so it can fail)."""
    fake = PACKAGE / "bpe" / "product.py"
    assert "tokfst_cli.artifacts" in _imports(fake) and "tokfst_cli.bpe.explicit" in _imports(fake)


@pytest.mark.parametrize("path", sorted((PACKAGE / "cli").glob("*.py")), ids=_name)
def test_command_functions_are_short(path):
    long = [(f.name, f.end_lineno - f.lineno + 1) for f in ast.walk(ast.parse(path.read_text()))
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.end_lineno - f.lineno + 1 > 60]
    assert not long, f"{_name(path)}: {long}"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_modules_have_docstrings_naming_their_stage(path):
    doc = ast.get_docstring(ast.parse(path.read_text()))
    if path.name == "__main__.py":
        return
    assert doc, f"{_name(path)} has no docstring"
    stage = STAGES.get(_name(path))
    if stage:
        assert doc.startswith(stage) and re.search(r"seed 00\d", doc.split("\n\n")[0]), doc.split("\n")[0]


FLAG = re.compile(r"--[a-z][a-z-]+")


@pytest.mark.parametrize("path", [p for p in LIBRARY if "bench" not in p.parts], ids=_name)
def test_library_errors_name_no_flags(path):
    """Arguments of raise ...Error(...) calls in library code contain no --flag."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            texts = [c.value for c in ast.walk(node.exc) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
            assert not any(FLAG.search(t) for t in texts), f"{_name(path)}:{node.lineno}: {texts}"
