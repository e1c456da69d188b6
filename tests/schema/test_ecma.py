"""ECMA-262 patterns: what they match where Python's re differs, and both engines agreeing on the translation."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli.schema import ecma

from .util import accepts, compiled

# (pattern, strings it finds a match in, strings it does not) by ECMA-262 (Unicode mode)
CASES = [
    (r"^\d+$", ["0123"], ["১২", "12\n"]),                 # \d is ASCII; $ is the very end
    (r"^\s$", [" ", "\u00a0", "\ufeff", "\u2028", "\t"], ["a", "\u200b"]),  # ECMA's WhiteSpace + LineTerminator
    (r"^\w+$", ["a_Z9"], ["é", "a-b"]),                    # \w is ASCII
    (r"^.$", ["a", "😀"], ["\n", "\r", "\u2028", "\u2029"]),  # . stops at every line terminator
    (r"^[^]$", ["\n", "x"], ["", "ab"]),                  # [^] is any character
    (r"a{,3}", ["a{,3}"], ["aaa"]),                       # not a quantifier in ECMA
    (r"^a|b$", ["ax", "xb"], ["xa", "bx"]),               # anchors bind per alternative
    (r"^\p{Lu}\p{Ll}$", ["Ab", "Éé"], ["ab", "A1"]),
    (r"^\uD83D\uDE00$", ["😀"], ["x", "😀x"]),     # a surrogate pair is one character
    (r"^\u{1F600}$", ["😀"], ["x"]),
    (r"^\cJ\0$", ["\n\0"], ["cJ0"]),
    (r"^[\D\s]$", ["a", " "], ["5"]),                      # a class with a negated escape
    (r"^[^\S\n]$", [" ", "\t"], ["\n", "a"]),
    (r"^(?<year>\d{4})-\d\d$", ["2024-01"], ["24-01"]),   # a named group matches like a group
    (r"colou?r", ["my colour", "color"], ["colr"]),       # unanchored: a match anywhere
    (r"(^ab$)", ["ab"], ["xab", "abx"]),                  # a group around the whole pattern
]


@pytest.mark.parametrize("pattern, good, bad", CASES)
def test_ecma_semantics(pattern, good, bad):
    fst = compiled({"type": "string", "pattern": pattern})
    for s in good:
        assert ecma.search(pattern, s) and accepts(fst, json.dumps(s, ensure_ascii=False)), s
    for s in bad:
        assert not ecma.search(pattern, s) and not accepts(fst, json.dumps(s, ensure_ascii=False)), s


PATTERNS = [p for p, _, _ in CASES] + [r"[a-c]+x?", r"^(ab|a)*b$", r"[^a\s]{2}", r"\.\*", r"^$", r"é|\n"]


@given(st.sampled_from(PATTERNS), st.lists(st.text(alphabet="abcx .*\n\r\u00a0é😀019{},3AZ", max_size=6), max_size=10))
@settings(max_examples=40, deadline=None)
def test_the_automaton_and_pythons_re_agree_on_the_translation(pattern, strings):
    """The byte automaton (stage A's compiler) and ``re`` read the same translation alike."""
    fst = compiled({"type": "string", "pattern": pattern})
    for s in strings:
        assert accepts(fst, json.dumps(s, ensure_ascii=False)) == ecma.search(pattern, s), (pattern, s)


@pytest.mark.parametrize("pattern", [r"(^.+\..+)|(^[a-zA-Z0-9_-]+)", r"(^a)|(b$)", r"((^x))|y", r"(?:^ab|cd$)",
                                     r"(?<n>^q)z"])
@settings(max_examples=150, deadline=None)
@given(st.text("abxyz.-_qcd ", max_size=8))
def test_grouped_anchors_search_as_python(pattern, text):
    """Anchors at the start of alternatives inside a group (and the mirror) search as Python's
    re.search does on these patterns (their ECMA and Python meanings agree here)."""
    import re  # deferred: this test only

    assert ecma.search(pattern, text) == (re.search(pattern.replace("(?<n>", "(?P<n>"), text) is not None)
