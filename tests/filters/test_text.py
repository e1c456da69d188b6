"""Text-level filters (Pitfalls 2025 Sec. 4.1, 4.2): ``scripts``, ``ascii``, ``nfc`` on stage A.

* the filtered promotion equals the promotion of the hand-written regex (pynini.equivalent),
  agnostic and canonical, GPT-2 and Llama-2;
* each filter DFA against its definition on random texts: Python's ``ord`` (ASCII), the ``regex``
  package's Script property (scripts), Hugging Face's NFC normalizer (nfc);
* an unknown script is refused before anything is built; a filter that empties the language says so.
"""

from __future__ import annotations

import pynini
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import normalizers

from tokfst_cli import pipeline
from tokfst_cli.errors import EmptyLanguageError, InputError
from tokfst_cli.filters import text
from tokfst_cli.filters.compose import Filters

from ..helpers import accepts, finals, transitions

CASES = [  # (filters, regex, the regex it must equal)
    (Filters(ascii=True), "[a-zé]{1,3}", "[a-z]{1,3}"),
    (Filters(scripts=("Greek",)), "[a-zα-ω]{1,2}", "[α-ω]{1,2}"),
    (Filters(scripts=("grek",)), "[a-zα-ω0-9 ]{1,2}", "[α-ω0-9 ]{1,2}"),  # Common: digits, space
    (Filters(scripts=("Greek",)), "(e|α)\u0301?", "α\u0301?"),  # Inherited: the combining acute
    (Filters(scripts=("Latin", "Han")), "[aα中]{2}", "[a中]{2}"),
    (Filters(nfc=True), "(e\u0301|é)x", "éx"),
    (Filters(nfc=True), "[aeé]\u0301?", "[aeé]|é\u0301"),  # á, é compose; é + U+0301 has nothing to compose to
    (Filters(nfc=True, scripts=("Latin",)), "(e\u0301|é|α)", "é"),
]


def equivalent(a: pynini.Fst, b: pynini.Fst) -> bool:
    return pynini.equivalent(pynini.determinize(a).minimize(), pynini.determinize(b).minimize())


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
@pytest.mark.parametrize("filters,pattern,expected", CASES, ids=[c[1] for c in CASES])
def test_filtered_promotion_is_the_hand_written_regex(tokenizer, name, filters, pattern, expected):
    model = tokenizer(name)
    for canonical in (False, True):
        got = pipeline.build(model, pattern, canonical=canonical, filters=filters)
        want = pipeline.build(model, expected, canonical=canonical)
        assert equivalent(got.fst, want.fst), (canonical, filters)
    assert not equivalent(pipeline.build(model, pattern).fst, pipeline.build(model, expected).fst)


def test_filters_keep_a_minimal_dfa_with_stage_a_symbols():
    a = pipeline.accept("[a-zé]{1,3}").fst
    out = text.restrict(a, [text.ascii_filter()], ["ascii"])
    want = pipeline.accept("[a-z]{1,3}").fst
    assert out.num_states() == want.num_states() and pynini.equivalent(out, want)
    assert out.input_symbols().name() == a.input_symbols().name()


CHARS = ("aZ0 .é\u00c5\u212b\u0301\u0308\u0323eAαΩω\u0345"  # precomposed, singletons, marks of several classes
         "中國한\u1100\u1161\u11a8\u0915\u093c\u0958\U0001f600\u05d0")  # Hangul jamo, a nukta, an exclusion


_TABLES: dict[int, tuple] = {}  # id of a (cached, long-lived) filter DFA -> its transitions, finals


def dfa_accepts(fst: pynini.Fst, s: str) -> bool:
    if id(fst) not in _TABLES:
        _TABLES[id(fst)] = transitions(fst), finals(fst)
    delta, fin = _TABLES[id(fst)]
    return accepts(fst, [b + 1 for b in s.encode("utf-8")], delta, fin)


@given(st.text(alphabet=st.sampled_from(CHARS) | st.characters(codec="utf-8"), max_size=5))
@settings(max_examples=200, deadline=None)
def test_dfas_match_their_definitions(s):
    assert dfa_accepts(text.ascii_filter(), s) == all(ord(c) < 128 for c in s)
    script = regex.compile(r"[\p{Script=Greek}\p{Script=Han}\p{Script=Common}\p{Script=Inherited}]*")
    assert dfa_accepts(text.scripts_filter(("GREEK", "HAN")), s) == bool(script.fullmatch(s))
    assert dfa_accepts(text.nfc_filter(), s) == (normalizers.NFC().normalize_str(s) == s)


def test_script_names_match_loosely_and_unknown_ones_are_refused():
    assert Filters(scripts=("old_italic", "Old Italic", "ITAL")).scripts == ("old_italic", "Old Italic", "ITAL")
    assert text.check_script("old-italic") == text.check_script("Ital")
    with pytest.raises(InputError) as e:
        Filters(scripts=("Latin", "Greekk"))
    assert e.value.hint == "scripts" and e.value.data["script"] == "Greekk"
    assert "Greek" in e.value.data["suggestion"] and "Latin" in e.value.data["known"].split(", ")
    for bad in ("", "}", "Latin}|.", "Klingon"):
        with pytest.raises(InputError):
            text.check_script(bad)


def test_a_filter_that_empties_the_language_says_so(tokenizer):
    with pytest.raises(EmptyLanguageError) as e:
        pipeline.build(tokenizer("gpt2"), "é+", filters=Filters(ascii=True))
    assert "text filters (ascii)" in str(e.value) and e.value.hint == "filters-empty"
