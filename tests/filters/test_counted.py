"""``max_tokens`` without the product (``filters.length.Counted``): a decoder and an index that walk S
and count tokens answer exactly as the materialized S ∩ F_N (minimal, made by OpenFst's
intersection), at every reachable state: masks, packed masks (made at load and on first use),
finality and refusals; the index (version 3) round-trips through ``constraint.load`` and the
command line. A canonical automaton that C leaves factorized is walked within N tokens
(``bpe.counted``, artifact version 5) and answers as C run on OpenFst's S ∩ F_N."""

from __future__ import annotations

import json
from functools import cache

import numpy as np
import pynini
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli import constraint, pipeline
from tokfst_cli.bpe.counted import CountedFactorized
from tokfst_cli.decoding.matcher import pack
from tokfst_cli.errors import DisallowedTokenError, EmptyLanguageError, LimitError
from tokfst_cli.filters import length
from tokfst_cli.filters.compose import Filters
from tokfst_cli.promotion.lexicon import marker_label
from tokfst_cli.text import catalogue
from tokfst_cli.text.regex import ByteAutomaton

from ..conftest import TOKENIZER
from ..runner import run

SMALL = [  # (tokenizer, regex, canonical, N): every reachable state is visited
    ("gpt2", "[a-c]{1,6}", False, 3),
    ("gpt2", "(ab|c)+", False, 4),
    ("gpt2", " (America|中)", False, 2),
    ("llama2", "[ab]+( [ab]+)*", False, 5),
    ("gpt2", "(ab|c){1,5}", True, 4),
    ("gpt2", "(ab|c)+", True, 4),  # a cyclic S whose C(S) passes the probe (pipeline.PROBE_ARCS)
    ("llama2", "[ab]{1,4}( [ab]{1,3})?", True, 3),
    ("bert", "(hello|unbelievable|tokenizers)", True, 2),
]


@cache
def built(name: str, pattern: str, canonical: bool, n: int) -> pipeline.Result:
    return pipeline.build(TOKENIZER(name), pattern, canonical=canonical, filters=Filters(max_tokens=n))


def counted_forms(result: pipeline.Result, tmp_path, monkeypatch) -> list:
    """The counted decoder in memory, loaded from its index, and with every packed mask made on first use."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps(result.index()))
    forms = [result.decoder(), constraint.load(str(path), result.model)]
    with monkeypatch.context() as m:
        m.setattr(constraint, "BITMASK_BUDGET", 0)
        forms.append(constraint.load(str(path), result.model))
    return forms


def lockstep(forms: list, exact, vocab_size: int, max_pairs: int | None = None, rng=None, shared: bool = True) -> int:
    """Breadth-first over the reachable states of every form and the exact decoder together
    (or random walks when ``rng``); returns the states visited. ``shared``: packed masks are
    read-only (shared rows); the factorized forms make theirs per step."""
    todo = [tuple(d.initial() for d in forms) + (exact.initial(),)]
    seen = set(todo)
    while todo and (max_pairs is None or len(seen) < max_pairs):
        states = todo.pop(rng.integers(len(todo)) if rng is not None else 0)
        want = exact.mask(states[-1])
        for d, s in zip(forms, states):
            assert (d.mask(s) == want).all()
            got = d.bitmask(s)
            assert got.dtype == np.int32 and not (shared and got.flags.writeable) and (got == pack(want)).all()
            assert d.is_final(s) == exact.is_final(states[-1])
        allowed = np.flatnonzero(want)
        refused = np.flatnonzero(~want)
        for token in refused[:: max(1, len(refused) // 5)].tolist() + [vocab_size]:
            for d, s in zip(forms, states):
                with pytest.raises(DisallowedTokenError):
                    d.advance(s, token)
        picks = allowed if rng is None else rng.choice(allowed, min(3, len(allowed)), replace=False)
        for token in picks.tolist():
            nxt = tuple(d.advance(s, token) for d, s in zip(forms + [exact], states))
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return len(seen)


@pytest.mark.parametrize("name,pattern,canonical,n", SMALL)
def test_counted_forms_answer_as_the_materialized_product(name, pattern, canonical, n, tmp_path, monkeypatch):
    result = built(name, pattern, canonical, n)
    assert result.counted is not None and result._fst is None  # no product yet
    forms = counted_forms(result, tmp_path, monkeypatch)
    assert all(type(d) is length.CountedDecoder for d in forms)
    exact = constraint.FstDecoder(result.fst, result.model.vocab_size)  # made now: S ∩ F_N, minimal
    assert lockstep(forms, exact, result.model.vocab_size) >= result.fst.num_states()


@settings(max_examples=5, deadline=None)
@given(extra=st.integers(0, 8), seed=st.integers(0, 2**32 - 1))
def test_counted_email_walks_answer_as_the_materialized_product(extra, seed, tmp_path_factory):
    """The bench's e-mail regex on GPT-2 (125k arcs in S): random walks, N from its fewest tokens on."""
    model = TOKENIZER("gpt2")
    pattern = catalogue.FOUNDATION["email"]
    plain = pipeline.build(model, pattern)
    a = length.fst_arrays(plain.fst)
    n = int(length.fewest(len(a.final), a.final, a.src, a.nextstate)[a.start]) + extra
    result = built("gpt2", pattern, False, n)
    path = tmp_path_factory.mktemp("email") / "e.json"
    path.write_text(json.dumps(result.index()))
    forms = [result.decoder(), constraint.load(str(path), model)]
    exact = constraint.FstDecoder(result.fst, model.vocab_size)
    lockstep(forms, exact, model.vocab_size, max_pairs=60, rng=np.random.default_rng(seed))


def test_fewest_is_the_shortest_distance_in_tokens():
    s = pipeline.build(TOKENIZER("gpt2"), "(ab|c)+x").fst
    a = length.fst_arrays(s)
    got = length.fewest(len(a.final), a.final, a.src, a.nextstate)
    # brute force: breadth first from each state
    succ = {q: set(a.nextstate[a.src == q].tolist()) for q in range(len(a.final))}
    for q in range(len(a.final)):
        layer, k = {q}, 0
        while not any(a.final[list(layer)]):
            layer, k = set().union(*(succ[p] for p in layer)), k + 1
        assert got[q] == k


def test_a_bound_that_never_binds_answers_as_the_plain_automaton():
    """No sequence of "[a-c]{1,6}" has more than 6 tokens: with N = 6 the decoder answers as S's at
    every state, the .fst is S itself, and the index still records N (version 3)."""
    model = TOKENIZER("gpt2")
    plain = pipeline.build(model, "[a-c]{1,6}")
    loose = pipeline.build(model, "[a-c]{1,6}", filters=Filters(max_tokens=6))
    assert loose.index()["version"] == 3 and loose.index()["max_tokens"] == 6 and plain.index()["version"] == 1
    assert lockstep([loose.decoder()], plain.decoder(), model.vocab_size) >= plain.fst.num_states()
    assert loose.fst.num_states() == plain.fst.num_states() and pynini.equivalent(loose.fst, plain.fst)
    with pytest.raises(EmptyLanguageError) as e:
        pipeline.build(model, "abcdefgh ", filters=Filters(max_tokens=0))
    assert e.value.hint == "filters-empty"


def test_fewest_is_the_same_in_python_and_in_openfst(monkeypatch):
    """Few edges are searched in Python, many by OpenFst's shortest distance: the same distances."""
    s = pipeline.build(TOKENIZER("llama2"), "[ab]+( [ab]+){0,3}c?").fst
    a = length.fst_arrays(s)
    small = length.fewest(len(a.final), a.final, a.src, a.nextstate)
    monkeypatch.setattr(length, "FEW_EDGES", 0)
    assert (length.fewest(len(a.final), a.final, a.src, a.nextstate) == small).all()


def test_a_damaged_or_misversioned_counted_index_is_refused(tmp_path):
    result = built("gpt2", "(ab|c)+", False, 4)
    model = result.model
    good = result.index()
    assert good["version"] == 3 and good["max_tokens"] == 4
    cases = {
        "tampered": dict(good, max_tokens=5),  # the checksum covers it
        "dropped": {k: v for k, v in good.items() if k != "max_tokens"},
        "old version": dict(good, version=1),
    }
    for what, index in cases.items():
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(index))
        with pytest.raises(Exception) as e:
            constraint.load(str(path), model)
        assert e.value.hint == "rebuild-index", what
    from tokfst_cli.decoding.index import checksum

    bad = dict(good, max_tokens=True)
    bad["sha256"] = checksum(bad)
    assert constraint.index_problem(bad) == "bad max_tokens field"


def test_a_finite_canonical_automaton_past_a_limit_is_built_from_s_within_n_tokens():
    """An acyclic S whose C(S) passes max_arcs (369 arcs > 300) where C(S ∩ F_2) fits: the
    .fst (no factorized form allowed) is C(S ∩ F_2), equal to the count applied after C."""
    model = TOKENIZER("gpt2")
    with pytest.raises(LimitError):
        pipeline.build(model, "[a-c]{1,6}", canonical=True, limits=pipeline.Limits(max_arcs=300), factorized_ok=False)
    tight = pipeline.build(model, "[a-c]{1,6}", canonical=True, filters=Filters(max_tokens=2),
                           limits=pipeline.Limits(max_arcs=300), factorized_ok=False)
    assert tight.counted is None and tight.fst is not None
    assert pynini.equivalent(tight.fst, built("gpt2", "[a-c]{1,6}", True, 2).fst)


def test_a_canonical_automaton_left_factorized_is_walked_within_n_tokens():
    """A cyclic S (free text) whose C(S) is factorized (max_arcs 1): the factorized form is
    walked within N tokens, every walk ends within N and its masks are those of the
    materialized count (C(S) materialized, then counted: ``filters.length``)."""
    model, n = TOKENIZER("gpt2"), 3
    pattern = "[a-z]+( [a-z]+){0,2}"
    lazy = pipeline.build(model, pattern, canonical=True, filters=Filters(max_tokens=n),
                          limits=pipeline.Limits(max_arcs=1))
    assert not lazy.materialized and lazy.counted is None and type(lazy.lazy) is CountedFactorized
    exact = built("gpt2", pattern, True, n).decoder()
    rng = np.random.default_rng(0)
    d = lazy.decoder()
    for _ in range(30):
        s, e, k = d.initial(), exact.initial(), 0
        while True:
            mask = d.mask(s)
            assert (mask == exact.mask(e)).all() and d.is_final(s) == exact.is_final(e)
            if not mask.any() or (d.is_final(s) and rng.random() < 0.3):
                break
            t = int(rng.choice(np.flatnonzero(mask)))
            s, e, k = d.advance(s, t), exact.advance(e, t), k + 1
        assert d.is_final(s) and k <= n


def test_promote_writes_the_counted_index_and_the_materialized_fst(tmp_path):
    pattern = catalogue.FOUNDATION["email"]
    out = tmp_path / "e.json"
    r = run("promote", TOKENIZER.arg("gpt2"), out, "-e", pattern, "--max-tokens", "11", "--format", "index")
    assert r.rc == 0 and r.err == b"", r.stderr
    index = json.loads(out.read_text())
    plain = pipeline.build(TOKENIZER("gpt2"), pattern)
    assert index["version"] == 3 and index["max_tokens"] == 11
    assert index["stats"]["states"] == plain.fst.num_states()  # S's states, not the product's
    huge = tmp_path / "h.json"
    r = run("promote", TOKENIZER.arg("gpt2"), huge, "-e", "[a-z]+", "--max-tokens", "1000000000",
            "--format", "index", "-v")  # no product: no limit to pass, not even for -v's summary
    assert r.rc == 0 and b"states" in r.err, r.stderr
    r = run("promote", TOKENIZER.arg("gpt2"), tmp_path / "h.fst", "-e", "[a-z]+", "--max-tokens", "1000000000")
    assert r.rc == 3 and b"token-count filter" in r.err and not (tmp_path / "h.fst").exists()


@cache
def by_product(name: str, pattern: str, n: int):
    """C(S_M ∩ F_N), factorized: OpenFst's product with the counter first, then C over it (the
    plain co-reachability fixpoint, no distances): the route the pipeline took before."""
    model = TOKENIZER(name)
    a = pipeline.accept(pattern)
    s = pipeline.promote(model, ByteAutomaton(pipeline.preprocess(model, a, True), pattern), marked=True)
    sn = length.restrict(s, n, marker_label(model), 10**6)
    result = pipeline.Result(model, pattern, canonical=True)
    pipeline.canonicalize_bpe(model, a, s if sn is None else sn, "implicit", pipeline.Limits(max_arcs=1), None, True,
                              result, "pipeline")
    return result.decoder()


FREE = [("gpt2", catalogue.FOUNDATION["email"], 5, 12), ("llama2", catalogue.FOUNDATION["email"], 5, 12),
        ("gpt2", "[a-z]+( [a-z]+){0,3}", 1, 6), ("llama2", "[a-z]+( [a-z]+){0,3}", 1, 6)]


@settings(max_examples=4, deadline=None)
@given(case=st.sampled_from(FREE), data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_factorized_counted_walks_answer_as_c_of_the_product(case, data, seed, tmp_path_factory):
    """Free text whose C(S) is factorized, GPT-2 and Llama-2: random walks of the counted
    factorized form, in memory and read back from its artifact (version 5), answer as C run on
    OpenFst's S_M ∩ F_N, mask for mask; none meets a dead end or passes N tokens."""
    name, pattern, lo, hi = case
    n = data.draw(st.integers(lo, hi))
    result = built(name, pattern, True, n)
    assert not result.materialized and type(result.lazy) is CountedFactorized
    path = tmp_path_factory.mktemp("cf") / "c.fac"
    path.write_bytes(result.to_bytes())
    forms = [result.decoder(), constraint.load(str(path), result.model)]
    assert type(forms[1]) is CountedFactorized and forms[1].limit == n
    exact = by_product(name, pattern, n)
    lockstep(forms, exact, result.model.vocab_size, max_pairs=40, rng=np.random.default_rng(seed), shared=False)
    d, rng = forms[1], np.random.default_rng(seed)
    for _ in range(20):  # walks to the end
        s, k = d.initial(), 0
        while not d.is_final(s) or rng.random() < 0.5:
            allowed = np.flatnonzero(d.mask(s))
            if not len(allowed):
                break
            s, k = d.advance(s, int(rng.choice(allowed))), k + 1
        assert d.is_final(s) and k <= n


def test_a_factorized_count_without_a_sequence_is_refused():
    """E-mail needs 4 GPT-2 tokens: with N = 3 the counted factorized form is empty, refused by
    name; with N = 4 its walks are HF's encodings of their texts, four tokens each."""
    with pytest.raises(EmptyLanguageError) as e:
        built("gpt2", catalogue.FOUNDATION["email"], True, 3)
    assert e.value.hint == "filters-empty"
    d = built("gpt2", catalogue.FOUNDATION["email"], True, 4).decoder()
    hf, rng = TOKENIZER.hf("gpt2"), np.random.default_rng(0)
    for _ in range(20):
        s, ids = d.initial(), []
        while d.mask(s).any():
            ids.append(int(rng.choice(np.flatnonzero(d.mask(s)))))
            s = d.advance(s, ids[-1])
        assert d.is_final(s) and len(ids) == 4
        assert hf.encode(hf.decode(ids), add_special_tokens=False).ids == ids


def test_a_damaged_counted_factorized_artifact_is_refused(tmp_path):
    from tokfst_cli.bpe import factorized
    from tokfst_cli.support.files import unpack

    result = built("gpt2", "[a-z]+( [a-z]+){0,3}", True, 3)
    data = result.to_bytes()
    header, _ = unpack(data, factorized.MAGIC, factorized.FORMAT, factorized.COUNTED, "x", "")
    assert header["version"] == 5 and header["max_tokens"] == 3

    def with_header(**change) -> bytes:
        size = int.from_bytes(data[len(factorized.MAGIC):len(factorized.MAGIC) + 4], "little")
        body = data[len(factorized.MAGIC) + 4 + size:]
        head = json.dumps({k: v for k, v in dict(header, **change).items() if v is not None}).encode()
        return factorized.MAGIC + len(head).to_bytes(4, "little") + head + body

    for what, bad in {"budget": with_header(max_tokens=4), "no budget": with_header(max_tokens=None),
                      "old version": with_header(version=3)}.items():
        path = tmp_path / "bad.fac"
        path.write_bytes(bad)
        with pytest.raises(Exception) as e:
            constraint.load(str(path), result.model)
        assert e.value.hint == "rebuild-factorized", what
