"""Random paths of an artifact (tokfst_cli.analysis.sample, ``tokfst sample``; issue #12 item 4): every sample
is a path of the artifact and spells its regex, canonical ones re-encode to themselves, the
materialized forms are sampled uniformly (path counts against brute force, frequencies against
the enumerated paths), and the command line's outputs, errors and atomic writes."""

from __future__ import annotations

import json
import re
from itertools import product

import numpy as np
import pynini
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli import constraint, pipeline
from tokfst_cli.analysis import sample
from tokfst_cli.automata.fst_io import write_fst
from tokfst_cli.automata.symbols import unescape
from tokfst_cli.constraint import FstDecoder
from tokfst_cli.decoding.matcher import Matcher
from tokfst_cli.errors import InputError
from tokfst_cli.text import catalogue

from .helpers import enumerate_paths
from .runner import run

REGEXES = {"date": catalogue.FOUNDATION["date"], "cities": catalogue.FOUNDATION["cities"],
           "words4": catalogue.MAXMATCH["words4"]}
FORMS = {"agnostic": dict(canonical=False), "canonical": dict(canonical=True),
         "factorized": dict(canonical=True, limits=pipeline.Limits(max_arcs=1))}


def write_artifact(result: pipeline.Result, path) -> str:
    """An artifact as tokfst promote writes it: agnostic .fst, canonical index JSON, or factorized."""
    if not result.materialized:
        path = path.with_suffix(".tfz")
        path.write_bytes(result.to_bytes())
    elif result.canonical:
        path = path.with_suffix(".json")
        path.write_text(json.dumps(result.index()))
    else:
        path = path.with_suffix(".fst")
        write_fst(str(path), result.fst)
    return str(path)


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_samples_are_paths_that_spell_the_regex(tokenizer, tmp_path, name, form):
    model, hf = tokenizer(name), tokenizer.hf(name)
    for rname, pattern in REGEXES.items():
        result = pipeline.build(model, pattern, **FORMS[form])
        decoder = constraint.load(write_artifact(result, tmp_path / rname), model)
        drawn = sample.sample(decoder, 30, max_tokens=24, seed=5)
        assert len(drawn) == 30 and sample.sample(decoder, 30, max_tokens=24, seed=5) == drawn  # seeded
        for ids in drawn:
            assert len(ids) <= 24
            m = Matcher(decoder)
            for t in ids:
                m.consume(t)
            assert m.is_final(), (rname, ids)
            text = hf.decode(ids, skip_special_tokens=False)
            assert re.fullmatch(pattern, text), (rname, text)
            if FORMS[form]["canonical"]:
                assert hf.encode(text, add_special_tokens=False).ids == ids, (rname, text)


def chi_square(counts: dict, paths: set) -> tuple[float, int]:
    """Pearson's statistic of the draws against the uniform law on ``paths``, and its degrees of freedom."""
    n = sum(counts.values())
    expected = n / len(paths)
    assert set(counts) <= paths
    return sum((counts.get(p, 0) - expected) ** 2 / expected for p in paths), len(paths) - 1


@pytest.mark.parametrize("max_tokens", [64, 3])
def test_uniform_over_the_enumerated_paths(tokenizer, max_tokens):
    """GPT-2, agnostic "(Bonn|Berlin)": its many tokenizations drawn about equally often (seeded,
    a generous bound: the statistic's mean is df and its sd sqrt(2 df))."""
    model = tokenizer("gpt2")
    fst = pipeline.build(model, "(Bonn|Berlin)").fst
    paths = {tuple(x - 1 for x in p) for p in enumerate_paths(fst) if len(p) <= max_tokens}
    how = sample.sampler(FstDecoder(fst, model.vocab_size), max_tokens)
    assert how.uniform and round(how.paths()) == len(paths) > 5
    rng = np.random.default_rng(11)
    counts: dict = {}
    for _ in range(60 * len(paths)):
        p = tuple(how.draw(rng))
        counts[p] = counts.get(p, 0) + 1
    stat, df = chi_square(counts, paths)
    assert set(counts) == paths
    assert stat < df + 6 * (2 * df) ** 0.5, (stat, df)


@st.composite
def acceptors(draw):
    """A small random deterministic token acceptor (cycles allowed), labels = token id + 1."""
    n, vocab = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    f = pynini.Fst()
    for _ in range(n):
        f.add_state()
    f.set_start(0)
    one = pynini.Weight.one(f.weight_type())
    for s in range(n):
        if draw(st.booleans()):
            f.set_final(s)
        for t in range(vocab):
            target = draw(st.integers(-1, n - 1))
            if target >= 0:
                f.add_arc(s, pynini.Arc(t + 1, t + 1, one, target))
    return f, vocab


def brute_force(fst: pynini.Fst, vocab: int, k: int) -> int:
    d = FstDecoder(fst, vocab)
    total = 0
    for length in range(k + 1):
        for seq in product(range(vocab), repeat=length):
            s = d.initial()
            try:
                for t in seq:
                    s = d.advance(s, t)
            except ValueError:
                continue
            total += d.is_final(s)
    return total


@given(acceptors(), st.integers(0, 4))
@settings(max_examples=80, deadline=None)
def test_path_counts_are_exact(fst_vocab, k):
    """The backward count equals brute force over every sequence of at most k tokens; an
    acceptor with none is refused; every draw is an accepted sequence."""
    fst, vocab = fst_vocab
    expected = brute_force(fst, vocab, k)
    if expected == 0:
        with pytest.raises(InputError):
            sample.sampler(FstDecoder(fst, vocab), k)
        return
    how = sample.sampler(FstDecoder(fst, vocab), k)
    assert round(how.paths()) == expected
    d = FstDecoder(fst, vocab)
    for ids in sample.sample(d, 5, k, seed=0):
        s = d.initial()
        for t in ids:
            s = d.advance(s, t)
        assert d.is_final(s) and len(ids) <= k


def test_walks_of_a_factorized_artifact(tokenizer):
    """No arc table: random walks, each ending at a final state within the budget; a budget no
    walk can meet is refused."""
    model = tokenizer("gpt2")
    decoder = pipeline.build(model, "[0-9]{4}-[0-9]{2}", canonical=True, limits=pipeline.Limits(max_arcs=1)).decoder()
    how = sample.sampler(decoder, 12)
    assert not how.uniform
    drawn = sample.sample(decoder, 20, 12, seed=2)
    assert len({tuple(x) for x in drawn}) > 10
    with pytest.raises(InputError, match="random walks"):
        sample.sample(decoder, 3, 1, seed=2)


# ---- the command line ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def artifacts(tmp_path_factory, tokenizer):
    d = tmp_path_factory.mktemp("sample")
    model = tokenizer("gpt2")
    index = d / "cities.json"
    index.write_text(json.dumps(pipeline.build(model, REGEXES["cities"], canonical=True).index()))
    fst = pipeline.build(model, REGEXES["date"]).fst
    write_fst(str(d / "date.fst"), fst)
    write_fst(str(d / "words.fst"), pipeline.build(model, "[a-z]+").fst)  # infinite: a budget's table is needed
    return d


def test_cli_outputs(tokenizer, artifacts):
    model, hf = tokenizer("gpt2"), tokenizer.hf("gpt2")
    r = run("sample", "gpt2", artifacts / "cities.json", "-n", "7", "--seed", "3")
    assert r.rc == 0 and r.err == b""
    ids = [list(map(int, line.split())) for line in r.stdout.splitlines()]
    assert len(ids) == 7 and all(hf.decode(x) in ("Cologne", "Berlin", "Bonn", "Munich") for x in ids)
    assert run("sample", "gpt2", artifacts / "cities.json", "-n", "7", "--seed", "3").out == r.out
    r = run("sample", "gpt2", artifacts / "date.fst", "-n", "5", "--seed", "1", "--output", "tokens")
    names = [line.split() for line in r.stdout.splitlines()]
    assert r.rc == 0 and len(names) == 5
    for line in names:  # token names read back as ids, spelling a date
        assert re.fullmatch(REGEXES["date"], hf.decode([model.token_id(unescape(x)) for x in line]))
    r = run("sample", "gpt2", artifacts / "date.fst", "-n", "4", "--output", "text", "--max-tokens", "5")
    assert r.rc == 0 and all(re.fullmatch(REGEXES["date"], t) for t in r.stdout.splitlines())
    r = run("sample", "gpt2", artifacts / "date.fst", "-n", "4", "--json", "-")
    for line in r.stdout.splitlines():
        obj = json.loads(line)
        assert obj["text"] == hf.decode(obj["ids"]) and re.fullmatch(REGEXES["date"], obj["text"])
        assert [model.token_id(unescape(x)) for x in obj["tokens"]] == obj["ids"]


def test_cli_errors_and_atomic_output(artifacts, tmp_path):
    out = tmp_path / "samples.txt"
    out.write_text("earlier\n")
    for args in (("sample", "gpt2", tmp_path / "missing.json", out),
                 ("sample", "gpt2", artifacts / "cities.json", out, "--max-tokens", "0"),
                 ("sample", "gpt2", artifacts / "date.fst", out, "--max-tokens", "3")):  # a date needs 4
        r = run(*args)
        assert r.rc == 2 and len(r.err_lines) == 1 and r.out == b"", (args, r.stderr)
        assert "Traceback" not in r.stderr
        assert out.read_text() == "earlier\n"  # a failed run leaves OUT alone
    r = run("sample", "gpt2", artifacts / "words.fst", out, "--max-tokens", "100000000")  # a table too big
    assert r.rc == 3 and len(r.err_lines) == 1 and "--max-tokens" in r.stderr and "Traceback" not in r.stderr
    assert out.read_text() == "earlier\n"
    r = run("sample", "gpt2", artifacts / "date.fst", out, "-n", "3", "--seed", "0")
    assert r.rc == 0 and r.out == b""
    assert len(out.read_text().splitlines()) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["samples.txt"]  # no temporary file left
