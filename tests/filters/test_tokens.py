"""Token-level filters (Pitfalls 2025 Sec. 4.3-4.5, App. B) on stage S, against their definitions.

Brute force on small finite languages: every path of the unfiltered automaton is checked with the
definition in plain Python (``definitions``), and the filtered automaton must accept exactly
those that pass: the agnostic promotion (model level), S_M with the pre-token boundary label
(pipeline level: the boundary passes every filter, resets ``fuse_spaces`` and is not counted by
``max_tokens``), and the canonical automata, differentially against Hugging Face's encodings
(C(S ∩ F) = C(S) ∩ F: HF's encoding of each text is accepted iff it passes). Then the cases the
issue names: Llama-2 keeps byte tokens for a CJK character absent from its vocabulary,
``literal_ascii`` is the identity on GPT-2, and ``max_tokens``'s size estimate and shortcuts.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pynini
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tokfst_cli import pipeline
from tokfst_cli.automata import graph
from tokfst_cli.automata.arrays import fst_arrays
from tokfst_cli.errors import EmptyLanguageError, LimitError
from tokfst_cli.filters import bytes as byte_filters
from tokfst_cli.filters import length, tokens
from tokfst_cli.filters.compose import Filters, apply_tokens
from tokfst_cli.promotion.lexicon import marker_label
from tokfst_cli.text.regex import ByteAutomaton

from ..conftest import TOKENIZER
from ..helpers import accepts, enumerate_paths, finals, isomorphic, transitions
from . import definitions as D

FILTERS = {
    "no_byte_tokens": (Filters(no_byte_tokens=True), D.no_byte_tokens),
    "literal_ascii": (Filters(literal_ascii=True), D.literal_ascii),
    "fuse_spaces": (Filters(fuse_spaces=True), D.fuse_spaces),
    "max_tokens": (Filters(max_tokens=2), D.max_tokens(2)),
    "all": (Filters(no_byte_tokens=True, literal_ascii=True, fuse_spaces=True, max_tokens=3),
            lambda m, p, k=None: all(f(m, p, k) for f in (D.no_byte_tokens, D.literal_ascii, D.fuse_spaces,
                                                          D.max_tokens(3)))),
}
PATTERNS = {  # small finite languages: spaces before words and before characters with and without a token
    "gpt2": [" (America|中)", "(é|中|켤)x?", " ?(a|é) ?", "a  b", " \na"],
    "llama2": [" (America|中)", "(é|中|켤|한)x?", " ?(a|é) ?", "a  b"],
}
CASES = [(name, p) for name, ps in PATTERNS.items() for p in ps]


@cache
def agnostic(name: str, pattern: str) -> pynini.Fst:
    return pipeline.build(TOKENIZER(name), pattern).fst


@cache
def marked(name: str, pattern: str) -> pynini.Fst:
    """S_M: the pipeline-level token automaton, pre-token boundaries kept as a label."""
    model = TOKENIZER(name)
    text = pipeline.preprocess(model, pipeline.accept(pattern), canonical=True)
    return pipeline.promote(model, ByteAutomaton(text, pattern), marked=True)


@cache
def every_path(name: str, pattern: str, kind: str) -> frozenset:
    return frozenset(enumerate_paths(agnostic(name, pattern) if kind == "agnostic" else marked(name, pattern)))


@pytest.mark.parametrize("fname", FILTERS)
@pytest.mark.parametrize("name,pattern", CASES)
def test_agnostic_and_marked_automata_keep_exactly_what_passes(name, pattern, fname):
    model = TOKENIZER(name)
    filters, passes = FILTERS[fname]
    for kind, marker in (("agnostic", None), ("marked", marker_label(model))):
        s, every = agnostic(name, pattern) if marker is None else marked(name, pattern), every_path(name, pattern, kind)
        want = {p for p in every if passes(model, p, marker)}
        try:
            got = enumerate_paths(apply_tokens(model, s, filters, marker))
        except EmptyLanguageError:
            got = set()
        assert got == want, (marker, sorted(got ^ want)[:3])
    if fname == "no_byte_tokens" and name == "llama2":
        assert len(want) < len(every)  # Llama-2 spells every character with <0xNN> tokens too


@pytest.mark.parametrize("name,pattern", [c for c in CASES if c != ("gpt2", " \na")])
def test_canonical_automata_keep_the_encodings_that_pass(name, pattern):
    """HF's encoding of each text, against the filtered canonical automaton (pipeline level)."""
    model, hf = TOKENIZER(name), TOKENIZER.hf(name)
    texts = [bytes(b - 1 for b in p).decode("utf-8") for p in enumerate_paths(pipeline.accept(pattern).fst)]
    encodings = [tuple(t + 1 for t in hf.encode(x, add_special_tokens=False).ids) for x in texts]
    for fname, (filters, passes) in FILTERS.items():
        try:
            fst = pipeline.build(model, pattern, canonical=True, filters=filters).fst
        except EmptyLanguageError:
            fst = None
        got = {e for e in encodings if fst is not None and accepts(fst, list(e), transitions(fst), finals(fst))}
        assert got == {e for e in encodings if passes(model, e)}, fname
        assert fst is None or len(enumerate_paths(fst)) == len(got)


def acceptor(sequences: list[tuple[int, ...]]) -> pynini.Fst:
    """The minimal DFA of some label sequences."""
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    start = f.add_state()
    f.set_start(start)
    for seq in sequences:
        s = start
        for label in seq:
            t = f.add_state()
            f.add_arc(s, pynini.Arc(label, label, one, t))
            s = t
        f.set_final(s)
    return pynini.determinize(f).minimize()


@settings(max_examples=25, deadline=None)
@given(data=st.data(), case=st.sampled_from([("gpt2", "[a-c]{1,3}( [0-9]+)?"), ("llama2", "(é|中|ab)+ ?[xy]"),
                                             ("gpt2", " (America|中)")]))
def test_removing_banned_arcs_is_openfsts_intersection(data, case):
    """The one-state shortcut (``tokens.without``): S with the banned labels' arcs removed and
    trimmed is S ∩ F for F = one state looping on every other label (pynini.intersect), also
    where removing arcs leaves dead states or nothing; the arcs it returns are its result's."""
    s = agnostic(*case)
    labels = sorted({a.ilabel for q in s.states() for a in s.arcs(q)})
    banned_labels = data.draw(st.lists(st.sampled_from(labels), max_size=len(labels), unique=True))
    banned = np.zeros(max(labels) + 2, bool)
    banned[banned_labels] = True
    f = pynini.Fst()
    f.set_start(f.add_state())
    f.set_final(0)
    for label in labels:
        if not banned[label]:
            f.add_arc(0, pynini.Arc(label, label, pynini.Weight.one(f.weight_type()), 0))
    expected = pynini.intersect(s.copy(), f)
    python = data.draw(st.booleans())  # trimmed in Python, or past TRIM_EDGES by OpenFst (no arcs returned)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(graph, "TRIM_EDGES", graph.TRIM_EDGES if python else 0)
        ours, arrays = tokens.without(s, banned)
    assert isomorphic(ours, expected)
    if not python:
        assert arrays is None
        return
    read = fst_arrays(ours)  # the arcs handed to the decoder are the result's own
    assert arrays.start == read.start and (arrays.final == read.final).all()
    for name in ("src", "ilabel", "olabel", "nextstate"):
        assert (getattr(arrays, name) == getattr(read, name)).all(), name


def test_the_boundary_label_passes_every_filter():
    """A boundary between [ ] and [a] resets fuse_spaces (the fused [ a] cannot span it), passes
    the others and is not counted by max_tokens (GPT-2's pre-tokenizer never splits " a", so the
    sequences are made up)."""
    model = TOKENIZER("gpt2")
    marker, space, a = marker_label(model), model.token_id("Ġ") + 1, model.token_id("a") + 1
    assert model.token_id("Ġa") is not None
    seqs = [(space, marker, a), (space, a), (marker, space, marker, a, marker), (a, marker, a, marker, a)]
    s = acceptor(seqs)
    for fname, (filters, passes) in FILTERS.items():
        want = {q for q in seqs if passes(model, q, marker)}
        assert enumerate_paths(apply_tokens(model, s, filters, marker)) == want, fname
    both = Filters(fuse_spaces=True, max_tokens=2)
    assert enumerate_paths(apply_tokens(model, s, both, marker)) == {seqs[0], seqs[2]}


def test_llama2_keeps_byte_tokens_for_a_character_it_has_no_token_for():
    model = TOKENIZER("llama2")
    assert "中" in D.literals(model) and "켤" not in D.literals(model)
    got = enumerate_paths(apply_tokens(model, agnostic("llama2", "(中|켤)"), Filters(no_byte_tokens=True)))
    fallback = tuple(model.token_id(f"<0x{b:02X}>") + 1 for b in "켤".encode("utf-8"))
    assert got == {(model.token_id("中") + 1,), fallback}


@pytest.mark.parametrize("pattern", ["[a-z]{1,3}( [0-9]+)?", "[a-zé中 ]{1,2}"])
def test_literal_ascii_is_the_identity_on_gpt2(pattern):
    model = TOKENIZER("gpt2")
    assert not byte_filters.fallback_ids(model)
    s = agnostic("gpt2", pattern)
    assert apply_tokens(model, s, Filters(literal_ascii=True)) is s
    canonical = pipeline.build(model, pattern, canonical=True)
    assert pynini.equivalent(pipeline.build(model, pattern, canonical=True, filters=Filters(literal_ascii=True)).fst,
                             canonical.fst)


def test_wordpiece_canonical_automata_are_filtered_after_c():
    model, hf = TOKENIZER("bert"), TOKENIZER.hf("bert")
    hf.no_padding()
    hf.no_truncation()
    pattern = "(hello|unbelievable|tokenizers)"
    one = pipeline.build(model, pattern, canonical=True, filters=Filters(max_tokens=1)).fst
    words = pattern.strip("()").split("|")
    short = {tuple(t + 1 for t in hf.encode(w, add_special_tokens=False).ids) for w in words}
    assert enumerate_paths(one) == {e for e in short if len(e) <= 1} != set()
    s = pipeline.build(model, pattern, canonical=True).fst
    filtered = pipeline.build(model, pattern, canonical=True, filters=Filters(no_byte_tokens=True)).fst
    assert pynini.equivalent(filtered, s)  # BERT has no byte tokens


@pytest.mark.parametrize("name,pattern,n", [("gpt2", "[a-c]{1,6}", 3), ("gpt2", "(ab|c)+", 4),
                                            ("llama2", "[ab]+( [ab]+)*", 5), ("gpt2", "a( b)*", 7)])
def test_max_tokens_size_estimate_is_the_accessible_product(name, pattern, n):
    """``length.layers`` counts exactly the states the intersection creates (marker included)."""
    model = TOKENIZER(name)
    for s, marker in ((agnostic(name, pattern), None), (marked(name, pattern), marker_label(model))):
        a = length.fst_arrays(s)
        labels = sorted({x for x in a.ilabel.tolist() if x != marker})
        product = pynini.intersect(s, length.counter(np.array(labels, np.int64), n, marker), connect=False)
        assert length.layers(a, n, marker, 10**6) == product.num_states()


def test_max_tokens_shortcuts_and_limits():
    model = TOKENIZER("gpt2")
    s = agnostic("gpt2", "[a-c]{1,6}")
    assert apply_tokens(model, s, Filters(max_tokens=6)) is s  # no path has more than 6 tokens
    assert apply_tokens(model, s, Filters(max_tokens=5)) is not s
    cyclic = agnostic("gpt2", "[a-c]+")
    with pytest.raises(LimitError) as e:
        apply_tokens(model, cyclic, Filters(max_tokens=10**9), max_states=1000)  # refused before building
    assert e.value.at_least and e.value.limit == "max_states" and e.value.value > 1000
    with pytest.raises(EmptyLanguageError) as e:
        apply_tokens(model, agnostic("gpt2", "abcdefgh "), Filters(max_tokens=0))
    assert "token filters (max_tokens)" in str(e.value) and e.value.hint == "filters-empty"


FILTER_BUILDERS = {"literal_ascii": byte_filters.literal_ascii, "no_byte_tokens": byte_filters.no_byte_tokens,
                   "fuse_spaces": tokens.fuse_spaces}


def promoted_s(model, pattern: str, level: str):
    """Stage S as promoted (agnostic, or S_M with its boundary label) and its boundary label."""
    if level == "agnostic":
        return None, pipeline._promote(model, pipeline.accept(pattern, model=model), pipeline.Limits(), None, True,
                                       False)
    text = pipeline.preprocess(model, pipeline.accept(pattern), canonical=True)
    return marker_label(model), pipeline._promote(model, ByteAutomaton(text, pattern), pipeline.Limits(), None,
                                                  True, True)


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(["gpt2", "llama2"]), fname=st.sampled_from(sorted(FILTER_BUILDERS)),
       pattern=st.sampled_from(["([0-9]+)?\\.[0-9]+", "[A-Za-z]{1,4}( [0-9]+)?", "(é|中|ab)+ ?[xy]",
                                "\\{\"a\":[0-9]{1,2}\\}", "[a-z0-9._%+-]+@[a-z]+\\.[a-z]{2,3}",
                                "\"a\" ?[a-z ]{1,5}", "[a-z]+( [a-z]+){0,3}", "(x|y) +[a-c]+"]),
       level=st.sampled_from(["agnostic", "marked"]))
@example(name="gpt2", fname="fuse_spaces", pattern="\"a\" ?[a-z ]{1,5}", level="marked")  # products one state
@example(name="llama2", fname="fuse_spaces", pattern="\"a\" ?[a-z ]{1,5}", level="agnostic")  # past minimal
@example(name="llama2", fname="no_byte_tokens", pattern="[A-Za-z]{1,4}( [0-9]+)?", level="marked")  # F': 4 states
@example(name="llama2", fname="no_byte_tokens", pattern="(é|中|ab)+ ?[xy]", level="agnostic")  # F': 5 states
def test_filters_on_stage_s_give_the_minimal_product_without_openfst(name, fname, pattern, level):
    """On stage S as promoted, the shortcuts (banned labels removed without trimming or
    minimizing; a product of few states made over the arrays, minimized only where its
    minimality is not proven) must give OpenFst's minimal S ∩ F (isomorphic), agnostic and
    marked, and the arcs handed to the decoder must be the result's own."""
    from tokfst_cli.filters.compose import apply_tokens_arrays

    model = TOKENIZER(name)
    marker, promoted = promoted_s(model, pattern, level)
    s = promoted.fst
    f = tokens.cached(model, fname, marker, FILTER_BUILDERS[fname])
    ours, arrays = apply_tokens_arrays(model, s, Filters(**{fname: True}), marker, arrays=promoted.arrays,
                                       agnostic=True)
    assert isomorphic(ours, pynini.intersect(s, f.fst).minimize())
    if arrays is not None:
        read = fst_arrays(ours)
        assert arrays.start == read.start and (arrays.final == read.final).all()
        for name_ in ("src", "ilabel", "nextstate"):
            assert (getattr(arrays, name_) == getattr(read, name_)).all(), name_


@settings(max_examples=40, deadline=None)
@given(data=st.data(), case=st.sampled_from([("gpt2", "[a-c]{1,3}( [0-9]+)?"), ("llama2", "(é|中|ab)+ ?[xy]"),
                                             ("gpt2", "\"a\" ?[a-z ]{1,5}")]))
def test_product_over_arrays_is_openfsts_intersection(data, case):
    """``product.intersect`` for any F of a few states (all final) over any DFA: the language of
    OpenFst's intersection, trim; where ``product.minimal`` claims minimality on a DFA that is
    not a promoted S the claim is not used, so only the language and trimness are checked."""
    from tokfst_cli.filters import product

    s = agnostic(*case)
    a = fst_arrays(s)
    labels = int(a.ilabel.max()) + 2
    k = data.draw(st.integers(1, 3))
    used = sorted(set(a.ilabel.tolist()))
    delta = np.full((k, labels), -1, np.int32)
    for q in range(k):
        for label in used:
            delta[q, label] = data.draw(st.integers(-1, k - 1))
    f = pynini.Fst()
    f.add_states(k)
    f.set_start(0)
    for q in range(k):
        f.set_final(q)
        for label in used:
            if delta[q, label] >= 0:
                f.add_arc(q, pynini.Arc(label, label, pynini.Weight.one(f.weight_type()), int(delta[q, label])))
    expected = pynini.intersect(s.copy(), f.arcsort("ilabel"))
    made = product.intersect(a, delta)
    assert made is not None
    arrays, fstate = made
    assert len(fstate) == len(arrays.final) and ((fstate >= 0) & (fstate < k)).all()
    from tokfst_cli.automata.arrays import fst_from

    ours = fst_from(arrays)
    assert ours.num_states() == ours.copy().connect().num_states()  # trim
    assert isomorphic(ours.copy().minimize(), expected.minimize()) or (
        ours.num_states() == 0 and expected.num_states() == 0)


def test_an_unproven_product_is_minimized():
    """GPT-2, S_M of '"a" ?[a-z ]{1,5}' with fuse_spaces: the product over the arrays has one
    state too many (two of its states after [ ] are equivalent); ``product.minimal`` must not
    claim it, so the pipeline minimizes."""
    from tokfst_cli.automata.arrays import fst_from
    from tokfst_cli.filters import product

    model = TOKENIZER("gpt2")
    marker, promoted = promoted_s(model, '"a" ?[a-z ]{1,5}', "marked")
    f = tokens.cached(model, "fuse_spaces", marker, tokens.fuse_spaces)
    arrays, fstate = product.intersect(promoted.arrays if promoted.arrays is not None
                                       else fst_arrays(promoted.fst), f.table)
    ours = fst_from(arrays)
    assert ours.copy().minimize().num_states() < ours.num_states()
    assert not product.minimal(arrays, fstate)
