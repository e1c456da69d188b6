"""``promote --json``, ``--format auto``, ``--symbols``, and artifacts named by their kind.

* ``--json``: the summary as one JSON object on stdout, checked against the file written (states,
  arcs and tokens read back with pynini, bytes, the tokenizer's fingerprint); refused with the
  artifact on stdout;
* ``--format auto``: the index under ``--max-states``, else the lazy form (one stderr line) whose
  masks are :func:`tokfst_cli.constraint.lazy`'s; with an option the lazy form does not take, the
  limit as before (exit 3);
* ``--symbols compact|none``: smaller files that OpenFst's fstinfo/fstprint read and tokfst's
  commands read with the tokenizer as the full one (same counts, same samples);
* ``draw``/``inspect`` on a file they cannot read: its kind and format version named, exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pynini
import pytest

from tokfst_cli import constraint, pipeline
from tokfst_cli.filters.compose import Filters
from tokfst_cli.support import kinds

from ..conftest import TOKENIZER
from ..runner import run, tool

GPT2 = TOKENIZER.arg("gpt2")
DATE = "[0-9]{2}-[0-9]{2}"
FREE = "[a-z]+ [a-z]+"  # A o T: thousands of states; its byte DFA: 4


def test_json_summary_matches_the_file(tmp_path: Path) -> None:
    out = tmp_path / "d.fst"
    r = run("promote", GPT2, "-e", DATE, out, "--json")
    assert r.rc == 0, r.stderr
    got = json.loads(r.stdout)
    fst = pynini.Fst.read(str(out))
    labels = {a.ilabel for s in fst.states() for a in fst.arcs(s)}
    assert got["format"] == got["requested_format"] == "fst" and got["out"] == str(out)
    assert got["bytes"] == out.stat().st_size
    assert (got["states"], got["arcs"], got["tokens"]) == (fst.num_states(), sum(fst.num_arcs(s) for s in
                                                                                  fst.states()), len(labels))
    assert got["fingerprint"] == TOKENIZER("gpt2").fingerprint and got["pattern"] == DATE
    assert got["canonical"] is False and got["terminals"] == 0 and got["seconds"] <= got["total_seconds"]
    assert r.stdout.count("\n") == 1  # one object, one line


@pytest.mark.parametrize("out", [None, "-"])
def test_json_with_the_artifact_on_stdout_is_refused(out: str | None) -> None:
    r = run("promote", GPT2, "-e", DATE, *([out] if out else []), "--json", "--format", "index")
    assert r.rc == 2 and r.out == b""
    assert len(r.err_lines) == 1 and "--json" in r.stderr and "OUT" in r.stderr


def test_format_auto_falls_back_to_lazy(tmp_path: Path) -> None:
    out = tmp_path / "free.auto"
    r = run("promote", GPT2, "-e", FREE, out, "--format", "auto", "--max-states", "1000", "--json")
    assert r.rc == 0, r.stderr
    assert len(r.err_lines) == 1 and "--max-states 1000" in r.stderr and "lazy" in r.stderr
    got = json.loads(r.stdout)
    assert (got["format"], got["requested_format"], got["states"]) == ("lazy", "auto", 4)
    assert "max_states 1000" in got["fallback"]
    model = TOKENIZER("gpt2")
    loaded, direct = constraint.load(str(out), model), constraint.lazy(model, FREE)
    s, t = loaded.initial(), direct.initial()
    for token in (model.token_id("hello"), model.token_id("Ġworld")):
        assert np.array_equal(loaded.mask(s), direct.mask(t))
        s, t = loaded.advance(s, token), direct.advance(t, token)
    assert loaded.is_final(s) and direct.is_final(t)


def test_format_auto_is_the_index_under_the_limit(tmp_path: Path) -> None:
    auto, index = tmp_path / "a.json", tmp_path / "i.json"
    assert run("promote", GPT2, "-e", DATE, auto, "--format", "auto").rc == 0
    assert run("promote", GPT2, "-e", DATE, index, "--format", "index").rc == 0
    assert json.loads(auto.read_text()) == json.loads(index.read_text())


@pytest.mark.parametrize("option", [["--terminals"], ["--fuse-spaces"], ["--max-tokens", "3"]])
def test_format_auto_with_what_lazy_refuses_keeps_the_limit(tmp_path: Path, option: list[str]) -> None:
    r = run("promote", GPT2, "-e", "(ab|cd)[a-z]{2}[0-9]{2}", tmp_path / "x", "--format", "auto", "--max-states", "20",
            *option)
    assert r.rc == 3 and len(r.err_lines) == 1 and "--max-states" in r.stderr
    assert not (tmp_path / "x").exists()


def test_build_auto_library() -> None:
    model = TOKENIZER("gpt2")
    form = pipeline.build_auto(model, FREE, limits=pipeline.Limits(max_states=1000))
    assert isinstance(form, pipeline.LazyForm) and form.reason.limit == "max_states"
    assert form.to_bytes().startswith(b"TOKFSTLAZY") and form.summary()["form"] == "lazy"
    assert isinstance(pipeline.build_auto(model, DATE), pipeline.Result)
    with pytest.raises(Exception, match="max_states"):
        pipeline.build_auto(model, FREE, filters=Filters(fuse_spaces=True), limits=pipeline.Limits(max_states=1000))


@pytest.fixture(scope="module")
def dates(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("symbols")
    paths = {mode: d / f"{mode}.fst" for mode in ("full", "compact", "none")}
    for mode, path in paths.items():
        r = run("promote", GPT2, "-e", DATE, path, "--symbols", mode)
        assert r.rc == 0, r.stderr
    return paths


def test_symbols_sizes_and_openfst_tools(dates: dict[str, Path]) -> None:
    size = {m: p.stat().st_size for m, p in dates.items()}
    assert size["none"] < size["compact"] < size["full"] / 10
    for mode, path in dates.items():
        info = tool("fstinfo", path)
        assert info.returncode == 0 and b"# of states                                       6" in info.stdout
        lines = tool("fstprint", path).stdout.decode().splitlines()
        assert len(lines) == sum(1 for _ in lines) and lines
    full = tool("fstprint", dates["full"]).stdout
    assert tool("fstprint", dates["compact"]).stdout == full  # the same names for the tokens on the arcs


def test_symbols_read_back_by_tokfst(dates: dict[str, Path]) -> None:
    counts = {m: run("count", GPT2, p, "--json").stdout for m, p in dates.items()}
    assert counts["compact"] == counts["none"] == counts["full"]
    drawn = {m: run("sample", GPT2, p, "-n", "5", "--seed", "3", "--uniform", "strings").stdout
             for m, p in dates.items()}
    assert drawn["compact"] == drawn["none"] == drawn["full"]
    loaded = constraint.load(str(dates["compact"]))  # without a tokenizer: the vocabulary's size kept
    assert loaded.vocab_size == TOKENIZER("gpt2").vocab_size


def test_symbols_refusals(tmp_path: Path) -> None:
    r = run("promote", GPT2, "-e", DATE, tmp_path / "i.json", "--format", "index", "--symbols", "compact")
    assert r.rc == 2 and "--symbols" in r.stderr
    r = run("promote", GPT2, "-e", '"[^"]*"', tmp_path / "t.fst", "--terminals", "--symbols", "none")
    assert r.rc == 2 and "terminal labels" in r.stderr and not (tmp_path / "t.fst").exists()
    for mode in ("compact", "full"):
        assert run("promote", GPT2, "-e", '"[^"]*"', tmp_path / f"{mode}.fst", "--terminals", "--symbols", mode).rc == 0
    model = TOKENIZER("gpt2")
    compact, full = (constraint.load(str(tmp_path / f"{m}.fst"), model) for m in ("compact", "full"))
    s, t = compact.initial(), full.initial()
    for token in (model.token_id('"'), model.token_id("hello"), model.token_id("Ġworld")):
        assert np.array_equal(compact.mask(s), full.mask(t)) and compact.mask(s).sum() > 1
        s, t = compact.advance(s, token), full.advance(t, token)


@pytest.fixture(scope="module")
def others(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("kinds")
    paths = {"lazy": d / "a.lazy", "index": d / "a.json", "bpe": d / "small.bpe", "bench": d / "b.json"}
    assert run("promote", GPT2, "-e", DATE, paths["lazy"], "--format", "lazy").rc == 0
    assert run("promote", GPT2, "-e", DATE, paths["index"], "--format", "index").rc == 0
    assert run("compile-bpe", "examples/small.json", paths["bpe"]).rc == 0
    paths["bench"].write_text(json.dumps({"format": "tokfst-bench", "version": 1, "runs": []}))
    return paths


@pytest.mark.parametrize("kind, words", [("lazy", "lazy artifact (tokfst-lazy v1)"),
                                         ("index", "index artifact (tokfst-index v"),
                                         ("bpe", "implicit A_BPE (tokfst-implicit-bpe v"),
                                         ("bench", "benchmark report (tokfst-bench v1)")])
def test_draw_names_the_kind(others: dict[str, Path], kind: str, words: str) -> None:
    r = run("draw", others[kind])
    assert r.rc == 2 and len(r.err_lines) == 1
    assert f"{others[kind]} is a tokfst {words}" in r.stderr and "draw reads OpenFst files" in r.stderr
    assert kinds.describe(others[kind].read_bytes()).startswith("a tokfst ")


@pytest.mark.parametrize("kind", ["bpe", "bench"])
def test_inspect_names_the_kind(others: dict[str, Path], kind: str) -> None:
    r = run("inspect", "examples/small.json" if kind == "bpe" else GPT2, others[kind])
    assert r.rc == 2 and len(r.err_lines) == 1
    assert "is a tokfst " in r.stderr and "not a constraint" in r.stderr


def test_describe_other_bytes() -> None:
    assert kinds.describe(b"") is None and kinds.describe(b'{"a": 1}') is None and kinds.describe(b"TOKFST") is None
    assert kinds.describe(kinds.OPENFST_HEAD + b"\0" * 8) == "an OpenFst file"
