"""Masks without dead ends (item 1): the factorized canonical BPE forms offer exactly the
tokens after which a canonical completion exists, i.e. the materialized (trimmed, minimal)
automaton's masks, at every reachable state; random mask-following walks never meet an empty
mask at a non-final state; the co-reachability table survives the artifact."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tokfst_cli import pipeline
from tokfst_cli.bpe import factorized
from tokfst_cli.bpe.word import DEAD, START
from tokfst_cli.constraint import FstDecoder, IndexDecoder
from tokfst_cli.errors import InputError, LimitError
from tokfst_cli.text import catalogue
from tokfst_cli.tokenizer import model as tokmod

from ..conftest import budget
from ..walks import equal_masks, walks
from .common import synthetic_tokenizer

FREE = {"free": "[a-z]+( [a-z]+){0,3}"}  # the issue's free-text regex; e-mail is in FOUNDATION
CASES = [(name, level, key) for name in ("gpt2", "llama2") for level in ("pipeline", "model")
         for key in (*catalogue.FOUNDATION, "free")]
WALKS = 10_000


def patterns() -> dict[str, str]:
    return {**catalogue.FOUNDATION, **FREE}


def forms(model, pattern: str, level: str):
    """(materialized result or None, factorized result) of one canonical constraint."""
    fac = pipeline.build(model, pattern, canonical=True, level=level, limits=pipeline.Limits(max_arcs=1))
    try:
        mat = pipeline.build(model, pattern, canonical=True, level=level, factorized_ok=False,
                             limits=pipeline.Limits(max_arcs=300_000))
    except Exception:  # too big to materialize here: the walks alone check the factorized form
        mat = None
    return mat, fac


@pytest.mark.parametrize("name, level, key", CASES)
def test_no_dead_ends_and_masks_equal_across_forms(tokenizer, name, level, key):
    model = tokenizer(name)
    pattern = patterns()[key]
    mat, fac = forms(model, pattern, level)
    dec = fac.decoder()
    decoders = {"factorized": dec}
    if mat is not None:
        decoders["fst"] = FstDecoder(mat.fst, model.vocab_size)
        decoders["index"] = IndexDecoder(mat.index())
        assert equal_masks(decoders["fst"], dec, 150) > 0
        assert equal_masks(decoders["index"], dec, 50) > 0
    for kind, d in decoders.items():
        walks(d, budget(WALKS if kind == "factorized" else 1_000), seed=len(name + level + key))


def test_the_issues_example(tokenizer):
    """Issue #12: 234 of 300 walks of this constraint ended in a dead end before."""
    model = tokenizer("gpt2")
    fac = pipeline.build(model, "(Cologne|Berlin|Bonn|Munich)", canonical=True, limits=pipeline.Limits(max_arcs=1))
    assert walks(fac.decoder(), 300, seed=0, random_len=64) == 0  # all end by themselves


@pytest.mark.parametrize("level", ["pipeline", "model"])
def test_artifact_keeps_the_table(tokenizer, level):
    model = tokenizer("llama2")  # byte fallback: units per fallback state
    pattern = "[a-zé漢]{1,3}( [0-9]+)?"
    fac = pipeline.build(model, pattern, canonical=True, level=level, limits=pipeline.Limits(max_arcs=1))
    dec = fac.decoder()
    data = fac.to_bytes()
    loaded = factorized.from_bytes(data, model)
    assert (loaded.live.pair_keys == dec.live.pair_keys).all() and (loaded.live.live == dec.live.live).all()
    assert (loaded.live.special_keys == dec.live.special_keys).all()
    assert equal_masks(dec, loaded, 100) > 0
    mat = pipeline.build(model, pattern, canonical=True, level=level)
    assert mat.materialized
    assert equal_masks(FstDecoder(mat.fst, model.vocab_size), loaded, 150) > 0


def test_damaged_table_is_refused(tokenizer):
    """A table that does not fit the classes, or unsorted keys: refused by name, not misread."""
    model = tokenizer("gpt2")
    dec = pipeline.build(model, "(ab|abc)( x)?", canonical=True, limits=pipeline.Limits(max_arcs=1)).decoder()
    good = dec.live.live
    dec.live.live = np.c_[good, np.zeros((len(good), 8), bool)]  # one byte too wide
    with pytest.raises(InputError, match="co-reachability"):
        factorized.from_bytes(factorized.to_bytes(dec, "(ab|abc)( x)?"), model)
    dec.live.live, keys = good, dec.live.pair_keys
    dec.live.pair_keys = keys[::-1].copy()
    if len(keys) > 1:
        with pytest.raises(InputError, match="co-reachability"):
            factorized.from_bytes(factorized.to_bytes(dec, "(ab|abc)( x)?"), model)


@pytest.mark.parametrize("level", ["pipeline", "model"])
def test_ignore_merges_trie_states(tmp_path, level):
    """ignore_merges: a word spelled like a token is that token, so the merge tokenization of the
    whole word is a dead end unless more follows; the trie's states are decided exactly."""
    path = synthetic_tokenizer(tmp_path, ignore_merges=True)
    model = tokmod.load(path)
    hf = Tokenizer.from_file(path)
    for pattern in ("(abc|ab)c?", "abca?", "x?yz(a|b)?", "(ca|b)(b|c)?a?"):
        mat, fac = forms(model, pattern, level)
        assert mat is not None
        assert equal_masks(FstDecoder(mat.fst, model.vocab_size), fac.decoder(), 500) > 0
        walks(fac.decoder(), 500, seed=3)
    assert hf.encode("abc", add_special_tokens=False).ids == [model.token_id("abc")]


ATOMS = ["a", "b", "e", "th", "the", " ", "0", "1", "9", "é", ",", "[a-z]", "[0-9]", "[a-c ]"]


@st.composite
def small_regex(draw, depth: int = 2) -> str:
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from(ATOMS))
    kind = draw(st.sampled_from(["cat", "alt", "opt", "rep"]))
    a = draw(small_regex(depth - 1))
    if kind == "opt":
        return f"({a})?"
    if kind == "rep":
        return f"({a}){{1,{draw(st.integers(1, 3))}}}"
    b = draw(small_regex(depth - 1))
    return f"({a}{b})" if kind == "cat" else f"({a}|{b})"


@given(small_regex(3), st.sampled_from(["gpt2", "llama2"]), st.sampled_from(["pipeline", "model"]))
@settings(max_examples=30, deadline=None)
def test_property_factorized_equals_materialized(pattern, name, level):
    from ..conftest import TOKENIZER

    model = TOKENIZER(name)
    try:
        mat = pipeline.build(model, pattern, canonical=True, level=level, factorized_ok=False,
                             limits=pipeline.Limits(max_arcs=100_000))
    except (InputError, LimitError):
        assume(False)  # refused by name elsewhere (outside the normalizer's image), or too big to compare here
    fac = pipeline.build(model, pattern, canonical=True, level=level, limits=pipeline.Limits(max_arcs=0))
    assert mat.materialized and not fac.materialized
    assert equal_masks(FstDecoder(mat.fst, model.vocab_size), fac.decoder(), 400) > 0


def test_the_table_is_refused_past_its_limit_before_it_is_built(tokenizer):
    """compute's max_cells counts the table's cells (units x classes), checked before allocating it."""
    from tokfst_cli.bpe.liveness import compute

    dec = pipeline.build(tokenizer("gpt2"), "[a-z]+( [a-z]+){0,3}", canonical=True,
                         limits=pipeline.Limits(max_arcs=0)).decoder()
    cells = dec.live.live.size
    assert compute(dec.word, dec.arcs, dec.finals, dec.start, max_cells=cells).live.size == cells
    with pytest.raises(LimitError) as e:
        compute(dec.word, dec.arcs, dec.finals, dec.start, max_cells=cells - 1)
    assert e.value.value == cells and e.value.exit_code == 3


def test_masks_made_on_first_use_equal_those_made_at_load(tokenizer):
    """Past ``warm``'s budget a unit's packed live tokens are made at its first step: the same
    masks. E-mail has both kinds of unit: few live tokens (a binary search each per step) and
    many (packed words, the class's BANNED ids cleared)."""
    model = tokenizer("gpt2")
    pattern = catalogue.FOUNDATION["email"]
    fac = pipeline.build(model, pattern, canonical=True, limits=pipeline.Limits(max_arcs=1))
    warm = fac.decoder()
    kinds = {words is None for _, _, words in warm.live._units.values()}
    assert kinds == {True, False}
    cold = factorized.from_bytes(fac.to_bytes(), model)
    cold.live._units.clear()
    cold.live._specials.clear()
    assert equal_masks(warm, cold, 300) > 0
    assert cold.live._units and cold.live._specials
    state = warm.initial()
    assert (warm.bitmask(state) == cold.bitmask(state)).all() and not warm.bitmask(state).flags.writeable
    buf = np.full(len(warm.bitmask(state)), -1, np.int32)  # out=: every word written, garbage included
    for t in np.flatnonzero(warm.mask(state))[:50].tolist():
        nxt = warm.advance(state, t)
        assert warm.bitmask(nxt, out=buf) is not None and (buf == warm.bitmask(nxt)).all()
    with pytest.raises(ValueError, match="words"):
        warm.bitmask(state, out=buf[:-1])


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_one_token_steps_equal_the_vectorized_ones(tokenizer, name):
    """``advance``'s scalar pair test and successor (``banned_pair``, ``after_one``) against the
    vectorized ``banned`` and ``after`` on random pairs and states, byte fallback included."""
    dec = pipeline.build(tokenizer(name), "[a-z]+", canonical=True, limits=pipeline.Limits(max_arcs=1)).decoder()
    imp, word = dec.imp, dec.word
    rng = np.random.default_rng(len(name))
    reps = np.array(sorted(word.step.reps.values()), np.int64)
    u = np.r_[rng.choice(reps, 3000), rng.integers(0, imp.vocab_size, 1000)]
    v = rng.integers(0, imp.vocab_size, len(u))
    want = imp.banned(u, v)
    assert want.any() and not want.all()
    assert [imp.banned_pair(int(a), int(b)) for a, b in zip(u, v)] == want.tolist()
    for fb in range(len(imp.fb_final)):
        ok = np.flatnonzero(word.step.follow(fb))[rng.integers(0, 10**9, 200) % int(word.step.follow(fb).sum())]
        for cls in (START, int(word.classes[ok[0]])):
            cs, fs, ns = word.after(cls, fb, DEAD, ok)
            assert ([word.after_one(cls, fb, DEAD, int(t)) for t in ok]
                    == list(zip(cs.tolist(), fs.tolist(), ns.tolist())))


def test_writing_a_factorized_artifact_does_not_load_numba():
    """numba (LLVM: about 0.5 s and 100 MB) loads only in a process that makes masks: promotion to
    the factorized form does not; the first mask does."""
    import subprocess
    import sys

    code = ("import sys\nfrom tokfst_cli import pipeline\nfrom tokfst_cli.tokenizer import model as tokenizer\n"
            "r = pipeline.build(tokenizer.load('gpt2'), '(ab|abc)( x)?', canonical=True, "
            "limits=pipeline.Limits(max_arcs=1))\n"
            "data = r.to_bytes()\nprint('numba' in sys.modules)\n"
            "d = r.decoder()\nd.bitmask(d.initial())\nprint('numba' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["False", "True"]


@given(keys=st.lists(st.integers(0, 5000), max_size=300), spread=st.sampled_from([1, 10_000]))
@settings(max_examples=60, deadline=None)
def test_distinct_is_unique(keys, spread):
    """units.distinct (a bool table for a narrow range, else a sort) is np.unique."""
    from tokfst_cli.bpe.units import distinct

    a = np.array(keys, np.int64) * spread
    assert np.array_equal(distinct(a), np.unique(a))
