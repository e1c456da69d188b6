"""Canonical MaxMatch on the command line: compile-maxmatch, promote --canonical on BERT,
canonical-check for WordPiece; OpenFst tools read the results; errors are one line with exit 2.

The installed console script runs as concurrent subprocesses (tests.runner.run_many), so that errors
are also checked for colour codes as a real pipe receives them. They share the session's cache: BERT's
stage P tables are built once for the whole suite (tests/cli/test_promote.py covers a cold cache)."""

from __future__ import annotations

import json

import pynini
import pytest

from tokfst_cli.errors import InputError
from tokfst_cli.maxmatch import factorized, product
from tokfst_cli.text.regex import compile_regex

from ..conftest import TOKENIZER, shared
from ..helpers import SIX_REGEXES
from ..runner import ANSI, make_env, run_many, tool

BERT = TOKENIZER.arg("bert")
DATE = SIX_REGEXES["date"]
WORDS = r"[a-z]+( [a-z]+){0,3}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tokenizer):
    return shared(tmp_path_factory, "maxmatch-cli", lambda d: _runs(d, tokenizer))


def _runs(d, tokenizer):
    env = make_env()
    model, hf = tokenizer("bert"), tokenizer.hf("bert")
    hf.no_padding()
    hf.no_truncation()
    texts = ["Hello, World! unaffable", "naïve café 中文", "x" * 120, ""]
    ids = "\n".join(" ".join(map(str, hf.encode(t, add_special_tokens=False).ids)) for t in texts) + "\n"
    bad = " ".join(str(model.token_id(t)) for t in ("un", "##af", "##fa", "##ble")) + "\n"
    # first T_Aho (the --artifact jobs read it) and one canonical promotion, which fills the cache's
    # stage P tables the other jobs share (run concurrently on a cold cache, each would build them);
    # beside them, two refusals that touch no cache
    first = run_many({"taho": (("compile-maxmatch", BERT, d / "taho.fst"), {"env": env}),
                      "date": (("promote", BERT, "-e", DATE, "--canonical", d / "date.fst"), {"env": env}),
                      "gpt2": (("compile-maxmatch", "gpt2", d / "x.fst"), {"env": env}),
                      "bad-method": (("promote", BERT, "-e", DATE, "--canonical", "--method", "implicit"),
                                     {"env": env})})
    jobs = {
        "info": (("compile-maxmatch", BERT, "--info", "--json"), {"env": env}),
        "date-aho": (("promote", BERT, "-e", DATE, "--canonical", "--method", "aho", "--artifact", d / "taho.fst",
                      d / "date-aho.fst"), {"env": env}),
        "date-index": (("promote", BERT, "-e", DATE, "--canonical", "--format", "index", d / "date.json"),
                       {"env": env}),
        "words-fst": (("promote", BERT, "-e", WORDS, "--canonical", d / "words.fst"), {"env": env}),
        "words-index": (("promote", BERT, "-e", WORDS, "--canonical", "--format", "index", d / "words.tfz"),
                        {"env": env}),
        "aho-free-text": (("promote", BERT, "-e", "[a-z]+", "--canonical", "--method", "aho", "--max-arcs", "50000",
                           d / "free.fst"), {"env": env}),
        "foreign-artifact": (("promote", BERT, "-e", DATE, "--canonical", "--method", "aho", "--artifact",
                              d / "date.fst"), {"env": env}),
        "check-ok": (("canonical-check", BERT), {"env": env, "stdin": ids.encode()}),
        "check-bad": (("canonical-check", BERT, "--json"), {"env": env, "stdin": (ids + bad).encode()}),
        "check-text": (("canonical-check", BERT, "--input", "text"), {"env": env, "stdin": b"Hello there!\n"}),
        "check-artifact": (("canonical-check", BERT, "--artifact", d / "taho.fst"),
                           {"env": env, "stdin": ids.encode()}),
    }
    return d, {**first, **run_many(jobs)}


def one_line_error(r, rc: int) -> None:
    assert r.rc == rc, r.err
    assert r.out == b""
    assert len(r.err_lines) == 1 and r.err_lines[0].startswith("tokfst: error:"), r.err
    assert b"Traceback" not in r.err and not ANSI.search(r.err)


def test_compile_maxmatch_writes_an_fst_the_openfst_tools_read(runs, tokenizer):
    d, r = runs
    assert r["taho"].rc == 0, r["taho"].err
    info = tool("fstinfo", d / "taho.fst")
    assert info.returncode == 0
    assert b"standard" in info.stdout
    fst = pynini.Fst.read(str(d / "taho.fst"))
    stats = json.loads(r["info"].out)
    assert stats["states"] == fst.num_states() and stats["arcs"] > stats["states"]
    assert stats["fingerprint"] == tokenizer("bert").fingerprint
    one_line_error(r["gpt2"], 2)
    assert not (d / "x.fst").exists()


def test_promote_canonical_date_fst_and_aho_agree(runs, tokenizer):
    d, r = runs
    for key in ("date", "date-aho", "date-index"):
        assert r[key].rc == 0, r[key].err
    assert tool("fstinfo", d / "date.fst").returncode == 0
    a, b = pynini.Fst.read(str(d / "date.fst")), pynini.Fst.read(str(d / "date-aho.fst"))
    assert pynini.equivalent(a, b)
    model = tokenizer("bert")
    m = product.canonical_machine(model, compile_regex(DATE).fst, 10_000)
    assert pynini.equivalent(a, product.materialize(m, 10_000, 1_000_000))
    index = json.loads((d / "date.json").read_text())
    assert index["stats"]["states"] == a.num_states() and index["format"] == "tokfst-index"
    hf = tokenizer.hf("bert")
    ids = hf.encode("2024-01-15", add_special_tokens=False).ids
    s = a.start()
    for t in ids:
        s = next(arc.nextstate for arc in a.arcs(s) if arc.ilabel == t + 1)
    assert a.final(s) != pynini.Weight.zero(a.weight_type())


def test_free_text_needs_the_factorized_form(runs, tokenizer):
    d, r = runs
    one_line_error(r["words-fst"], 3)
    assert "--format index" in r["words-fst"].err_lines[0]
    assert not (d / "words.fst").exists()
    assert r["words-index"].rc == 0 and "factorized" in r["words-index"].err.decode()
    model, hf = tokenizer("bert"), tokenizer.hf("bert")
    loaded = factorized.load(str(d / "words.tfz"), model)
    fresh = product.canonical_machine(model, compile_regex(WORDS).fst, 10_000)
    assert (loaded.mask(loaded.initial()) == fresh.mask(fresh.initial())).all()
    assert loaded.accepts(hf.encode("the unaffable fox", add_special_tokens=False).ids)
    assert not loaded.accepts(hf.encode("the unaffable fox.", add_special_tokens=False).ids)
    data = (d / "words.tfz").read_bytes()
    (d / "cut.tfz").write_bytes(data[:-50])
    with pytest.raises(InputError, match="truncated or damaged"):
        factorized.load(str(d / "cut.tfz"), model)
    with pytest.raises(InputError, match="another tokenizer"):
        factorized.load(str(d / "words.tfz"), tokenizer("gpt2"))


def test_bad_method_and_foreign_artifact_are_usage_errors(runs):
    _, r = runs
    one_line_error(r["bad-method"], 2)
    assert "product, aho" in r["bad-method"].err_lines[0]
    one_line_error(r["foreign-artifact"], 2)


def test_aho_route_refuses_free_text_before_exhausting_memory(runs):
    d, r = runs
    one_line_error(r["aho-free-text"], 3)
    assert "--method product" in r["aho-free-text"].err_lines[0]
    assert not (d / "free.fst").exists()


def test_canonical_check_wordpiece(runs, tokenizer):
    _, r = runs
    assert r["check-ok"].rc == 0, r["check-ok"].err
    assert r["check-ok"].out.decode().count("canonical\t") == 4
    assert r["check-bad"].rc == 1
    recs = [json.loads(line) for line in r["check-bad"].out.decode().splitlines()]
    assert [rec["canonical"] for rec in recs] == [True, True, True, True, False]
    model = tokenizer("bert")
    assert recs[-1]["index"] == 1 and "longest match" in recs[-1]["reason"]
    assert [model.tokens[i] for i in recs[-1]["canonical_tokens"]] == ["una", "##ffa", "##ble"]
    assert r["check-text"].rc == 0 and r["check-text"].out.decode().startswith("canonical\thello")
    one_line_error(r["check-artifact"], 2)
