"""Every example of ``tokfst COMMAND --help`` runs, in order, from a directory that sees ``examples/``
and ``tests/`` as the repository root does (a file one example writes is there for the next)."""

from __future__ import annotations

import os

import pytest

from .runner import run_line
from .test_examples import ROOT, _env


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """One directory for every help text, in order: COMMAND's examples may use an earlier one's files."""
    d = tmp_path_factory.mktemp("help")
    (d / "examples").symlink_to(ROOT / "examples")
    (d / "tests").symlink_to(ROOT / "tests")
    return d


def help_examples() -> dict[str, list[str]]:
    """Each help text's ``tokfst ...`` example lines (continuations joined), by the text's name."""
    from tokfst_cli.cli import helptext

    out = {}
    for name, text in vars(helptext).items():
        if not isinstance(text, str) or "\n  tokfst " not in text:
            continue
        lines, pending = [], ""
        for raw in text.splitlines():
            line = raw.strip()
            if pending:
                line, pending = pending + " " + line, ""
            elif not raw.startswith("  tokfst "):
                continue
            if line.endswith("\\"):
                pending = line[:-1].rstrip()
                continue
            lines.append(line)
        out[name] = lines
    return out


HELP = help_examples()
THOROUGH = os.environ.get("TOKFST_TEST_PROFILE") == "thorough"


def test_help_texts_have_examples():
    assert sum(len(v) for v in HELP.values()) >= 40 and {"PROMOTE", "DRAW", "BENCH"} <= set(HELP)


@pytest.mark.parametrize("name", sorted(HELP))
def test_help_examples_run(name, workdir, tmp_path_factory):
    """Every example line of the help text, in order, from the repository root's view; ``tokfst bench``
    lines (minutes each: training, peers, 100 MB inputs) only in the thorough profile."""
    env = _env()  # the session's shared cache (T of GPT-2 built once), but for `tokfst cache clear`:
    if name == "CACHE":
        env["TOKFST_CACHE"] = str(tmp_path_factory.getbasetemp() / "help-cache")
    ran = 0
    for line in HELP[name]:
        if line.startswith("tokfst bench ") and not THOROUGH:
            continue
        proc = run_line(line, workdir, env)
        assert proc.returncode in (0, 1) if line.startswith("tokfst canonical-check") else proc.returncode == 0, (
            f"{name}: {line}\nexit {proc.returncode}\n{proc.stderr[-2000:]}")
        ran += 1
    if not ran:
        pytest.skip(f"{name}: its examples are benchmarks (TOKFST_TEST_PROFILE=thorough runs them)")
