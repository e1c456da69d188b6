"""Regex -> UTF-8 byte automaton: property tests against Python's re and between both constructions."""

from __future__ import annotations

import re

import pynini
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokfst_cli.automata import utf8
from tokfst_cli.errors import EmptyLanguageError, InputError, LimitError
from tokfst_cli.text.regex import _from_interegular_fsm, _needs_interegular, compile_regex, parse

from .helpers import SIX_REGEXES, accepts, finals, transitions

SCALARS = st.integers(0, utf8.MAX_CODE_POINT).filter(lambda c: not 0xD800 <= c <= 0xDFFF)


def _matches(seqs, data: bytes) -> bool:
    return any(len(s) == len(data) and all(lo <= b <= hi for b, (lo, hi) in zip(data, s)) for s in seqs)


@given(st.lists(st.tuples(SCALARS, st.integers(0, 5000)), min_size=1, max_size=4), st.lists(SCALARS, max_size=30))
@settings(max_examples=200, deadline=None)
def test_utf8_sequences_cover_exactly_the_ranges(raw, probes):
    ranges = [(lo, min(lo + w, utf8.MAX_CODE_POINT)) for lo, w in raw]
    seqs = list(utf8.sequences(ranges))
    edges = [c for lo, hi in ranges for c in (lo, hi, lo - 1, hi + 1) if 0 <= c <= utf8.MAX_CODE_POINT]
    for cp in probes + edges:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        inside = any(lo <= cp <= hi for lo, hi in ranges)
        assert _matches(seqs, chr(cp).encode("utf-8")) == inside, hex(cp)
    for s in seqs:  # every sequence spells valid UTF-8 at both corners
        bytes(lo for lo, _ in s).decode("utf-8")
        bytes(hi for _, hi in s).decode("utf-8")


def test_complement_excludes_surrogates_and_covers_the_rest():
    comp = utf8.complement([(0x61, 0x61)])
    assert (0, 0x60) in comp and (0x62, 0xD7FF) in comp and (0xE000, utf8.MAX_CODE_POINT) in comp


def _accepts_text(fst, data: bytes, cache={}) -> bool:
    key = id(fst)
    if key not in cache:
        cache[key] = (fst, transitions(fst), finals(fst))
    _, delta, fin = cache[key]
    return accepts(fst, [b + 1 for b in data], delta, fin)


# Python re with re.ASCII is the reference: interegular's \d, \w and \s are ASCII classes.
PATTERNS = list(SIX_REGEXES.values()) + [
    r"[^\"]*", r".", r".*x", r"é|è|ü+", r"[À-ÿ]{1,3}", r"[^a-z]+", r"\w+\s\d?", r"(ab|a)*b", r"a{2,}",
    r"(ab){0,3}c?", r"", r"x{0}", r"(a|)+", r"[\u4e00-\u9fff]+[。？]", r"[^\u0000-\u007f]", r"\U0001F600|[😀-😃]{2}",
    r"[-.]\.?", r"\\\n\t", r"(?s).", r"(?i)straße|Ab[c-e]",
]
ALPHABET = st.sampled_from(list("abcexyzABE0129.-_@{}\":,\n\t\\ éèüÀÿ中。？😀😃\u0080\u07ff\u0800\uffff\U00010000"))


@pytest.mark.parametrize("pattern", PATTERNS)
@given(data=st.data())
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_byte_automaton_agrees_with_python_re(pattern, data):
    fst = _compiled(pattern)
    text = data.draw(st.one_of(st.text(ALPHABET, max_size=12), st.from_regex(re.compile(pattern, re.ASCII),
                                                                              fullmatch=True)))
    flags = re.ASCII if "(?i)" not in pattern else 0
    if "(?i)" in pattern and not text.isascii():
        return  # interegular folds case per character; compare on ASCII only (documented)
    expected = re.fullmatch(pattern, text, flags) is not None
    assert _accepts_text(fst, text.encode("utf-8")) == expected, (pattern, text)


_COMPILED: dict[str, pynini.Fst] = {}


def _compiled(pattern: str) -> pynini.Fst:
    if pattern not in _COMPILED:
        _COMPILED[pattern] = compile_regex(pattern).fst
    return _COMPILED[pattern]


ATOMS = st.sampled_from(["a", "b", "é", "中", ".", "[ab]", "[^a]", "[a-é]", "\\n", "x"])


@st.composite
def regexes(draw, depth=3):
    if depth == 0 or draw(st.booleans()):
        return draw(ATOMS)
    kind = draw(st.sampled_from(["cat", "alt", "star", "rep", "opt", "group"]))
    sub = lambda: draw(regexes(depth=depth - 1))  # noqa: E731
    if kind == "cat":
        return sub() + sub()
    if kind == "alt":
        return f"(?:{sub()}|{sub()})"
    if kind == "star":
        return f"(?:{sub()})*"
    if kind == "opt":
        return f"(?:{sub()})?"
    if kind == "group":
        return f"({sub()})"
    lo = draw(st.integers(0, 2))
    return f"(?:{sub()}){{{lo},{lo + draw(st.integers(0, 2))}}}"


@given(regexes(), st.lists(st.text(st.sampled_from(list("abé中x\nc")), max_size=6), max_size=15))
@settings(max_examples=150, deadline=None)
def test_random_regexes_both_constructions_agree_with_re(pattern, texts):
    fst = compile_regex(pattern).fst
    tree = parse(pattern)
    assert not _needs_interegular(tree)
    reference = _from_interegular_fsm(pattern, tree, 10**6).rmepsilon()
    reference = pynini.determinize(reference).minimize()
    assert pynini.equivalent(fst, reference)
    for text in texts:
        assert _accepts_text(fst, text.encode()) == (re.fullmatch(pattern, text) is not None), (pattern, text)


@pytest.mark.parametrize("data", [b"\x80", b"\xc0\x80", b"\xed\xa0\x80", b"\xf5\x80\x80\x80", b"\xe0\x80\x80",
                                  b"\xc3", b"a\xffb", b"\xf4\x90\x80\x80"])
def test_invalid_utf8_is_never_accepted(data):
    for pattern in (r"(?s).*", r"[^a]*", r"[\x00-\U0010ffff]*"):
        assert not _accepts_text(_compiled(pattern), data)
        assert _accepts_text(_compiled(pattern), "é中😀".encode())


@pytest.mark.parametrize("pattern,construct", [
    (r"(a)\1", "Group references"), (r"a(?<=a)b", "lookbehind"), (r"a(?=b)b", "lookahead"),
    (r"a(?!b)", "negative lookahead"), (r"a^b", "'^'"), (r"(^a)+b", "'^'"), (r"a(b", "missing )"),
    (r"[z-a]", "bad character range"),
])
def test_unsupported_and_invalid_syntax_is_named(pattern, construct):
    with pytest.raises(InputError) as e:
        compile_regex(pattern)
    assert construct in e.value.one_line() and "\n" not in e.value.one_line()


def test_empty_language_is_reported():
    with pytest.raises(EmptyLanguageError):
        compile_regex(r"[^\s\S]")


def test_state_limit_stops_a_blow_up():
    with pytest.raises(LimitError, match="max_states") as e:
        compile_regex(r"(a|b)*a(a|b){16}", max_states=5000)
    assert (e.value.limit, e.value.bound) == ("max_states", 5000) and e.value.stage.startswith("the byte automaton")
    assert compile_regex(r"(a|b)*a(a|b){4}", max_states=5000).fst.num_states() == 32


@pytest.mark.parametrize("anchored,plain", [(r"^\d{4}$", r"\d{4}"), (r"\A(ab|c)\Z", r"(ab|c)"),
                                            (r"(^a.+)|(^[b-d]+$)", r"(a.+)|([b-d]+)"), (r"^x|y$", r"x|y"),
                                            (r"^a\$", r"a\$"), (r"[$^]b", r"[$^]b")])
def test_anchors_at_the_edges_of_the_match_mean_nothing(anchored, plain):
    """Matching is whole: ^, \\A at the start and $, \\Z at the end of an alternative (groups that
    are whole alternatives opened) are accepted and change nothing; an escaped $ stays a dollar."""
    a, b = compile_regex(anchored).fst, compile_regex(plain).fst
    assert pynini.equivalent(a.rmepsilon(), b.rmepsilon())
