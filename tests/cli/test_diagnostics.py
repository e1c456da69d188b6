"""``tokfst doctor``, ``tokfst cache list|clear``, and the progress line (--quiet, TOKFST_QUIET).

doctor and cache in process (tests.runner.run) with a private TOKFST_CACHE, and doctor once as a
process with a PATH that has no OpenFst tools and no dot (exit 0, "missing:" lines). The
progress line needs a terminal: the installed script with stderr on a pseudo-terminal
(tests.runner.tokfst_on_a_tty); ``TOKFST_PROGRESS_DELAY=0`` shows it at once for a fast command.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys

import pytest
from rich.console import Console

from tokfst_cli.cli.output import Output
from tokfst_cli.support import progress as stages

from ..runner import ANSI, SGR, make_env, run, tokfst, tokfst_on_a_tty
from .test_battery import BASES

PATTERN = "(ab|c)+"


@pytest.fixture
def small(tmp_path):
    p = tmp_path / "bpe.json"
    p.write_text(json.dumps(BASES["bpe"]))
    return p


# --- doctor ---------------------------------------------------------------------------------------

def test_doctor(monkeypatch, tmp_path):
    monkeypatch.setenv("TOKFST_CACHE", str(tmp_path / "cache"))
    r = run("doctor")
    assert r.rc == 0 and r.err == b"", r.err
    text = r.stdout
    for needle in ("tokfst ", "python ", "pynini ", "tokenizers ", "numpy ", "interegular ", "typer ",
                   "OpenFst tools ", "graphviz dot ", str(tmp_path / "cache"), "cache writable "):
        assert needle in text, needle
    r = run("doctor", "--json")
    rep = json.loads(r.stdout)
    assert rep["cache"]["location"] == str(tmp_path / "cache") and rep["cache"]["entries"] == 0
    assert rep["cache"]["writable"] is True and rep["packages"]["pynini"]
    assert set(rep) >= {"tokfst", "python", "packages", "tools", "cache", "missing", "optional"}
    from importlib import metadata  # deferred: this test only

    for name in ("numba", "lark", "torch", "transformers", "xgrammar", "llguidance", "outlines-core"):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        assert (rep["packages"].get(name) or rep["optional"][name]["version"]) == installed, name
        assert f"{name} " in text


def test_doctor_names_what_is_missing_and_exits_0(tmp_path):
    env = make_env(tmp_path / "file" / "cache", PATH=os.path.dirname(sys.executable))
    (tmp_path / "file").write_text("not a directory")
    r = tokfst("doctor", env=env)
    assert r.rc == 0, r.err
    missing = [line for line in r.stdout.splitlines() if line.startswith("missing:")]
    assert any("fstinfo" in m for m in missing) and any("dot" in m for m in missing), r.stdout
    assert any("TOKFST_CACHE" in m for m in missing) and re.search(r"^cache writable +NO$", r.stdout, re.M)
    rep = json.loads(tokfst("doctor", "--json", env=env).out)
    assert rep["tools"]["openfst"]["path"] is None and rep["cache"]["writable"] is False


# --- cache list | clear ---------------------------------------------------------------------------

def test_cache_list_and_clear(monkeypatch, tmp_path, small):
    root = tmp_path / "cache"
    monkeypatch.setenv("TOKFST_CACHE", str(root))
    r = run("cache", "list")
    assert r.rc == 0 and r.stdout.splitlines() == ["name  kind  bytes  verified"]
    assert run("promote", small, tmp_path / "x.fst", "-e", PATTERN, "--canonical", "--level", "model").rc == 0
    (root / "notes.txt").write_text("not tokfst's")
    r = run("cache", "list")
    rows = [line.split() for line in r.stdout.splitlines()[1:]]
    assert sorted(k for _, k, _, _ in rows) == ["bpe", "bpe-classes", "lexicon"] and all(v == "yes" for *_, v in rows)
    assert "3 entries" in r.stderr
    lexicon = next(root.glob("v2-lexicon-*.fst"))
    lexicon.write_bytes(lexicon.read_bytes()[:-1])
    doc = json.loads(run("cache", "list", "--json").stdout)
    assert doc["location"] == str(root)
    assert {e["kind"]: e["verified"] for e in doc["entries"]} == {"lexicon": False, "bpe": True, "bpe-classes": True}
    assert run("promote", small, tmp_path / "x.fst", "-e", PATTERN).rc == 0  # rebuilt
    assert all(e["verified"] for e in json.loads(run("cache", "list", "--json").stdout)["entries"])
    r = run("cache", "clear")
    assert r.rc == 0 and "removed 3 files" in r.stderr
    assert [p.name for p in root.iterdir()] == ["notes.txt"]
    assert run("cache", "frobnicate").rc == 2


# --- the progress line ----------------------------------------------------------------------------

def test_progress_line_on_a_terminal(tmp_path, small):
    env = make_env(tmp_path / "cache", TERM="xterm-256color", TOKFST_PROGRESS_DELAY="0")
    args = ("promote", small, tmp_path / "x.fst", "-e", PATTERN, "--canonical")
    r = tokfst_on_a_tty(*args, env=env)
    assert r.rc == 0
    shown = ANSI.sub(b"", re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", r.err)).decode("utf-8", "replace")
    assert "promoting" in shown and " — " in shown and re.search(r"\d+\.\d s", shown), shown
    assert SGR.search(r.err)  # rich colours the spinner ...
    r = tokfst_on_a_tty(*args, env={**env, "NO_COLOR": "1"})
    assert r.rc == 0 and b"promoting" in r.err and not SGR.search(r.err)  # ... unless NO_COLOR
    r = tokfst_on_a_tty(*args, env={**env, "TOKFST_QUIET": "1"})
    assert r.rc == 0 and r.err == b""  # quiet: nothing


def test_no_progress_line_for_fast_work_or_without_a_terminal(tmp_path, small):
    env = make_env(tmp_path / "cache", TERM="xterm-256color")
    r = tokfst_on_a_tty("promote", small, tmp_path / "x.fst", "-e", PATTERN, env=env)
    assert r.rc == 0 and r.err == b""  # under a second: nothing
    r = tokfst("promote", small, tmp_path / "y.fst", "-e", PATTERN, env={**env, "TOKFST_PROGRESS_DELAY": "0"})
    assert r.rc == 0 and r.err == b""  # stderr a pipe: nothing


def test_progress_line_after_a_second(tmp_path):
    """compile-bpe on GPT-2 with a cold cache runs ~1 s: past the delay (0.3 s here) the line appears,
    and is erased at the end."""
    env = make_env(tmp_path / "cache", TERM="xterm-256color", TOKFST_PROGRESS_DELAY="0.3")
    r = tokfst_on_a_tty("compile-bpe", "gpt2", tmp_path / "g.bpe", env=env)
    assert r.rc == 0
    assert b"compiling A_BPE" in r.err and b"tokfst: wrote" in r.err


def test_progress_text_shows_stage_size_and_elapsed():
    out = Output()
    try:
        out.err = Console(file=io.StringIO(), force_terminal=True, width=200)
        with out.progress("working"):
            with stages.stage("S: promotion"):
                stages.report(12345)
                assert re.fullmatch(r"working — S: promotion — 12,345 — \d+\.\d s", out.line.text())
            assert re.fullmatch(r"working — \d+\.\d s", out.line.text())
        out.set_quiet()
        assert not out.line.enabled()
    finally:
        out.unlisten()
