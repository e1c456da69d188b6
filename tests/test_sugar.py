"""Seed 004's syntactic sugar: each group's automaton against a Python reference on random
strings, its size against the regex it abbreviates, and its errors."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli import pipeline
from tokfst_cli.errors import InputError
from tokfst_cli.text.regex import compile_regex

from .conftest import TOKENIZER
from .schema.util import accepts

TEXT = "café → ü, a(b)c|d\\e"
ALPHABET = "abcé→ü, ()|\\ED"


def _escaped(text: str) -> str:
    return "".join("\\" + c if c in "()|\\" else c for c in text)


@settings(max_examples=150, deadline=None)
@given(st.text(ALPHABET, max_size=8) | st.builds(lambda i, j: TEXT[min(i, j):max(i, j)],
                                                 st.integers(0, len(TEXT)), st.integers(0, len(TEXT))))
def test_substring_of(s):
    f = _compiled(f"(?P<SUBSTRING_OF>{_escaped(TEXT)})")
    assert accepts(f, s) == (s != "" and s in TEXT)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["ab", "b", "", "a", ";", "; "]), max_size=7).map("".join),
       st.sampled_from([(1, 3), (0, 2), (2, None), (0, None), (3, 3)]))
def test_delimited_list(s, bound):
    lo, hi = bound
    spec = f"{{{lo},{'' if hi is None else hi}}}" if (lo, hi) != (1, None) else ""
    if hi == lo:
        spec = f"{{{lo}}}"
    f = _compiled(f"(?P<DELIMITED_LIST>(a+b?)(; ?){spec})")
    counts = range(lo, (hi if hi is not None else 8) + 1)
    want = any(re.fullmatch(r"a+b?" + (r"(?:; ?a+b?)" * (n - 1)), s) for n in counts if n > 0) or (lo == 0 and s == "")
    assert accepts(f, s) == want


ITEMS = ["red", "green", "blue", "x"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(ITEMS), max_size=5), st.sampled_from([", ", ","]),
       st.sampled_from([(1, None), (2, 3), (1, 1)]))
def test_delimited_subsequence_of(chosen, sep, bound):
    lo, hi = bound
    spec = "" if hi is None else f"{{{lo},{hi}}}"
    f = _compiled("(?P<DELIMITED_SUBSEQUENCE_OF>" + "".join(f"({w})" for w in ITEMS) + f"(, ){spec})")
    text = sep.join(chosen)
    subsequences = {", ".join(c) for n in range(1, len(ITEMS) + 1) for c in itertools.combinations(ITEMS, n)
                    if lo <= n <= (hi or len(ITEMS))}
    assert accepts(f, text) == (text in subsequences)


@settings(max_examples=150, deadline=None)
@given(st.text("xESTOPND|", max_size=10))
def test_text_until(s):
    f = _compiled(r"(?P<TEXT_UNTIL>END|STOP|a\|b)")
    stops = ["END", "STOP", "a|b"]
    first = min((s.find(t) + len(t) for t in stops if t in s), default=None)
    assert accepts(f, s) == (first == len(s))


def test_sugar_stays_small_where_the_regex_grows():
    text = "The quick brown fox jumps over the lazy dog. " * 4
    sugar = _compiled(f"(?P<SUBSTRING_OF>{text})")
    assert sugar.num_states() <= 2 * len(text) - 1
    items = [f"item{i}" for i in range(12)]
    chain = _compiled("(?P<DELIMITED_SUBSEQUENCE_OF>" + "".join(f"({w})" for w in items) + "(, ))")
    assert chain.num_states() <= 12 * 12 * 8  # states (item, count) and the words': polynomial, not 2^12


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_sugar_promotes_like_its_expansion(name):
    """The promoted sugar equals the promoted regex it abbreviates (same minimal token automaton)."""
    model = TOKENIZER(name)
    sugar = pipeline.build(model, "(?P<DELIMITED_SUBSEQUENCE_OF>(red)(green)(blue)(, ))").fst
    spelled = "|".join(", ".join(c) for n in range(1, 4) for c in itertools.combinations(["red", "green", "blue"], n))
    expanded = pipeline.build(model, f"(?:{spelled})").fst
    assert sugar.num_states() == expanded.num_states()
    assert sum(sugar.num_arcs(s) for s in sugar.states()) == sum(expanded.num_arcs(s) for s in expanded.states())


@pytest.mark.parametrize("pattern, message", [
    ("(?P<SUBSTRING_OF>)", "text is empty"),
    ("(?P<DELIMITED_LIST>(a))", "expected 2"),
    ("(?P<DELIMITED_LIST>(a)(,){3,1})", "max below min"),
    ("(?P<DELIMITED_LIST>(a)(,)x)", "unexpected"),
    ("(?P<DELIMITED_SUBSEQUENCE_OF>(a))", "at least one item"),
    ("(?P<TEXT_UNTIL>a||b)", "stop phrase is empty"),
])
def test_malformed_bodies_are_refused_by_name(pattern, message):
    with pytest.raises(InputError, match=message) as e:
        compile_regex(pattern)
    assert "write (?P<" in e.value.fix


def _compiled(pattern: str):
    return compile_regex(pattern).fst
