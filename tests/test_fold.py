"""Stage A's folded construction (``text.fold``): a concatenation built from the right with a
minimization after every step accepts what Thompson's NFA determinized in one go accepts, on
patterns Hypothesis draws from bounded repetitions, classes, words and alternations; and the
pattern whose subset construction explodes (``[a-z]{1,50}x[a-z]{1,50}``) compiles to its small
minimal DFA, which ``re.fullmatch`` agrees with."""

from __future__ import annotations

import random
import re

import pynini
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli.automata.fsts import text_acceptor
from tokfst_cli.text import regex as regex_mod
from tokfst_cli.text.regex import _Builder, compile_regex, determinize_bounded, parse

CLASSES = ["[ab]", "[a-c]", "a", "b", "x", "[^a]", "."]
ATOMS = st.one_of(st.sampled_from(CLASSES), st.sampled_from(["ab", "ba", "xa"]).map(lambda w: f"(?:{w})"))


@st.composite
def repetitions(draw) -> str:
    atom = draw(ATOMS)
    lo = draw(st.integers(0, 3))
    hi = lo + draw(st.integers(0, 4))
    return f"{atom}{{{lo},{hi}}}"


PIECE = st.one_of(ATOMS, repetitions())
CONCAT = st.lists(PIECE, min_size=1, max_size=4).map("".join)
PATTERNS = st.one_of(CONCAT, st.lists(CONCAT, min_size=2, max_size=3).map("|".join),
                     st.tuples(CONCAT, repetitions()).map(lambda t: f"(?:{t[0]}){t[1][t[1].index('{'):]}"))


def built(pattern: str, folded: bool) -> pynini.Fst:
    nfa = _Builder(pattern, 1_000_000, fold=folded).build(parse(pattern))
    return determinize_bounded(nfa, 1_000_000).minimize()


@settings(max_examples=300, deadline=None)
@given(PATTERNS)
def test_the_folded_construction_accepts_the_same_language(pattern):
    assert pynini.equivalent(built(pattern, False), built(pattern, True)), pattern


def test_the_exploding_subset_construction_is_folded_to_the_minimal_dfa(monkeypatch):
    pattern = "[a-z]{1,50}x[a-z]{1,50}"
    small = "[a-z]{1,12}x[a-z]{1,12}"
    plain = built(small, False)
    monkeypatch.setattr(regex_mod, "PROBE_STATES", 64)  # the small one takes the folded path too
    assert pynini.equivalent(plain, compile_regex(small).fst)
    monkeypatch.undo()
    a = compile_regex(pattern).fst
    assert a.num_states() < 2_000  # the subset construction passes a million
    rng = random.Random(7)
    letters = "abcxyz"
    for _ in range(400):
        text = "".join(rng.choice(letters) for _ in range(rng.randint(1, 110)))
        accepted = pynini.compose(text_acceptor(text), a).connect().num_states() > 0
        assert accepted == bool(re.fullmatch(pattern, text)), text
