"""The shape of the package: layers read off the paths, imports only downward, no import cycles.

* a module's layer is its first path component under ``tokfst_cli/`` (``LAYERS``, bottom first);
  it may import a lower layer, or its own package; ``bpe`` and ``maxmatch`` share a rank and
  never import each other;
* no import cycle between modules, function-local (deferred) imports included;
* subpackage ``__init__``s import nothing but ``compat`` (the bottom layer, for the names of release
  0.1), so importing a low module never pulls in a high one;
* no function in ``tokfst_cli/cli/`` is longer than 60 lines (commands parse, call the library
  and write, as OpenFst's ``*-main.cc``);
* every module has a docstring; each stage package says which stage it is; papers are cited by
  author and year (``docs/references.md``), never by a file number of this project;
* the library never names a command-line flag in an error (the CLI words errors: ``cli/errors.py``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import tokfst_cli
from tokfst_cli.automata.graph import strongly_connected

PACKAGE = Path(tokfst_cli.__file__).parent
ROOT = PACKAGE.parent
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
LIBRARY = [p for p in MODULES if p.relative_to(PACKAGE).parts[0] not in ("cli", "__main__.py")]

LAYERS = [  # bottom first; a tuple is one rank
    ("errors", "compat"),
    ("support",),
    ("tokenizer",),
    ("automata",),
    ("decoding",),
    ("text",),  # stage A
    ("schema",),  # stage A
    ("grammar",),  # stage A
    ("pretok",),  # stage P
    ("filters",),
    ("promotion",),  # stage S
    ("bpe", "maxmatch"),  # stage C
    ("encoder",),  # stage C, run on text
    ("constraint",),
    ("pipeline",),
    ("sources",),
    ("analysis",),
    ("batch",),
    ("bench",),
    ("cli",),
    ("__init__", "__main__"),
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
STAGE_PACKAGES = {"text": "Stage A", "schema": "Stage A", "grammar": "Stage A", "pretok": "Stage P",
                  "promotion": "Stage S", "bpe": "Stage C", "maxmatch": "Stage C"}


def module_name(p: Path) -> str:
    parts = list(p.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


NAMES = {module_name(p): p for p in MODULES}


def layer(module: str) -> str:
    """The layer of a module: its first component under the package (``__init__`` for the package)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1].removesuffix(".py")


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(module imported, line, deferred) for every import of a tokfst module in ``path``."""
    tree = ast.parse(path.read_text())
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join([*base, *(node.module.split(".") if node.module else [])])
            subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in NAMES]
            names = subs if subs and len(subs) == len(node.names) else [mod, *subs]
        else:
            continue
        for name in names:
            while name and name not in NAMES:
                name = name.rpartition(".")[0]
            if name:
                out.append((name, node.lineno, node.col_offset > 0))
    return out


GRAPH = {module_name(p): {m for m, _, _ in imports(p)} - {module_name(p)} for p in MODULES}


def allowed(src: str, dst: str) -> bool:
    a, b = layer(src), layer(dst)
    if a == b:
        return True
    return RANK[b] < RANK[a]


def test_every_top_level_name_has_a_layer():
    tops = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in MODULES}
    assert tops <= set(RANK), f"no layer for {sorted(tops - set(RANK))}: add it to LAYERS (and docs/architecture.md)"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_downward(path):
    src = module_name(path)
    bad = [f"line {line}: {dst} ({layer(dst)}){' (deferred)' if deferred else ''}"
           for dst, line, deferred in imports(path) if dst != src and not allowed(src, dst)]
    assert not bad, f"{src} ({layer(src)}) imports a higher layer: {bad}"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (``automata.graph``'s Tarjan)."""
    comps = strongly_connected({v: sorted(ws) for v, ws in graph.items()}, sorted(graph))
    return [sorted(c) for c in comps if len(c) > 1]


def test_no_import_cycles_deferred_imports_included():
    found = cycles(GRAPH)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_cycle_check_can_fail():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert not cycles({"a": {"b"}, "b": set()})


def test_the_import_reader_sees_relative_and_deferred_imports(tmp_path):
    fake = PACKAGE / "bpe" / "_probe_for_the_test.py"
    fake.write_text("from ..pipeline import build\n\ndef f():\n    from ..cli import app\n")
    try:
        got = {(m, d) for m, _, d in imports(fake)}
    finally:
        fake.unlink()
    assert ("tokfst_cli.pipeline", False) in got and ("tokfst_cli.cli.app", True) in got
    assert not allowed("tokfst_cli.bpe.x", "tokfst_cli.pipeline")
    assert not allowed("tokfst_cli.bpe.x", "tokfst_cli.maxmatch.taho")
    assert allowed("tokfst_cli.pipeline", "tokfst_cli.bpe.implicit")


@pytest.mark.parametrize("path", [p for p in MODULES if p.name == "__init__.py" and p.parent != PACKAGE],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_subpackage_inits_import_nothing(path):
    tree = ast.parse(path.read_text())
    top = [n.lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
           and any(m.startswith("tokfst_cli") for m in [getattr(n, "module", None) or "", *(a.name for a in n.names)])
           and not (isinstance(n, ast.ImportFrom) and n.module == "tokfst_cli"
                    and [a.name for a in n.names] == ["compat"])]
    assert not top, f"{path.relative_to(PACKAGE)} imports a tokfst module other than compat (line {top[0]})"


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_library_modules_import_neither_commands_nor_tests(path):
    bad = [m for m, _, _ in imports(path) if m.startswith("tokfst_cli.cli")]
    text = path.read_text()
    assert not bad and not re.search(r"^\s*(from|import) tests\b", text, re.M), f"{path}: {bad}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "cli").glob("*.py")), ids=lambda p: p.name)
def test_command_functions_are_short(path):
    long = [(f.name, f.end_lineno - f.lineno + 1) for f in ast.walk(ast.parse(path.read_text()))
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.end_lineno - f.lineno + 1 > 60]
    assert not long, f"{path.name}: {long}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_have_docstrings(path):
    if path.name == "__main__.py":
        return
    assert ast.get_docstring(ast.parse(path.read_text())), f"{path.relative_to(PACKAGE)} has no docstring"


@pytest.mark.parametrize("package", sorted(STAGE_PACKAGES))
def test_stage_packages_say_their_stage(package):
    doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text()))
    assert doc and doc.startswith(STAGE_PACKAGES[package]), f"{package}/__init__.py: {doc[:60] if doc else doc}"


SEED = re.compile(r"\bseeds? 00\d|\bissue #\d+|\(#\d+\)|\bissues? #\d")
DOCS = [*MODULES, *sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_papers_cited_by_author_and_no_issue_numbers(path):
    """``docs/references.md`` keys, not this project's file numbers; history lives in CHANGELOG.md."""
    bad = [f"{i}: {line.strip()[:80]}" for i, line in enumerate(path.read_text().splitlines(), 1) if SEED.search(line)]
    assert not bad, f"{path.relative_to(ROOT)}: {bad[:5]}"


FLAG = re.compile(r"--[a-z][a-z-]+")


@pytest.mark.parametrize("path", [p for p in LIBRARY if "bench" not in p.parts],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_library_errors_name_no_flags(path):
    """Arguments of raise ...Error(...) calls in library code contain no --flag."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            texts = [c.value for c in ast.walk(node.exc) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
            assert not any(FLAG.search(t) for t in texts), f"{path.relative_to(PACKAGE)}:{node.lineno}: {texts}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_function_local_imports_say_why(path):
    """An import inside a function is there for start-up time or a heavy or optional library, and says
    so: a ``# deferred: REASON`` comment on its line or the line above. Everything else imports at the top."""
    lines = path.read_text().splitlines()
    bad = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node.col_offset > 0:
            above = lines[node.lineno - 2].strip()
            said = "# deferred: " in lines[node.end_lineno - 1] or above.startswith("# deferred: ")
            under_type_checking = "TYPE_CHECKING" in lines[node.lineno - 2]
            if not said and not under_type_checking:
                bad.append(f"line {node.lineno}: {lines[node.lineno - 1].strip()}")
    assert not bad, f"{path.relative_to(PACKAGE)}: function-local imports without a reason: {bad}"
