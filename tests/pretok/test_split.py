"""The Split transducer P (tokfst_cli.pretok.split) against HF's own pre-tokenizer, piece for piece.

For the pre-tokenizer regexes the major BPE families publish and for small patterns that stress
leftmost-first priority, lazy and bounded quantifiers, lookahead and (?i), P's unique output on
generated texts equals ``Split(pattern, behavior="isolated").pre_tokenize_str``.
"""

from __future__ import annotations

from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Regex
from tokenizers import pre_tokenizers as pt

from tokfst_cli.errors import InputError
from tokfst_cli.pretok import split

FAMILIES = {
    "gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    "cl100k": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    "o200k": r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
             r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
             r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
             r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    "deepseek-digits": r"\p{N}{1,3}",
    "deepseek-cjk": r"[一-龥\u3040-ゟ゠-ヿ]+",
    "deepseek-main": r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
                     r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
STRESS = ["a|ab", "ab|a", "a*?b", "(a|ab)(c|bcd)", "x+(?=y)", "a+?", "(ab|a)(bc|c)?", "[ab]{2,3}", "a{1,2}?b?",
          "(?i:ab)c", "\\s+(?=\\S)|\\s", "b(?!a)|ba", "(a|b)*c"]
CHARS = list("aAbBcxy sS'tTdDlmrve0123456789٣\n\r\t.,!?/-_") + ["  ", "ſ", "K", "é", "e\u0301", "漢", "字", "ひ",
                                                                  "ア", "😀", "\u00a0", "\u2028", "ǅ", "Ⅻ", "'S", "'ll"]
texts = st.lists(st.sampled_from(CHARS), max_size=14).map("".join)


@lru_cache(maxsize=None)
def machines(pattern: str):
    return split.split_transducer(pattern), pt.Split(Regex(pattern), behavior="isolated")


def check(pattern: str, text: str) -> None:
    p, hf = machines(pattern)
    assert split.apply(p, text) == [piece for piece, _ in hf.pre_tokenize_str(text)], (pattern, text)


@pytest.mark.parametrize("name", sorted(FAMILIES))
@settings(max_examples=int(__import__("os").environ.get("TOKFST_SPLIT_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_family_patterns_cut_as_hf(name, text):
    check(FAMILIES[name], text)


@pytest.mark.parametrize("pattern", STRESS)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(st.sampled_from(list("abcxy ABS\n")), max_size=10).map("".join))
def test_priority_lookahead_and_lazy_quantifiers_as_hf(pattern, text):
    check(pattern, text)


@pytest.mark.parametrize("text", ["Hello  world's   123 !!  x", "don't STOP'S", "\n\n  foo\r\n", "x  ", "", " ",
                                  "I'll   we've", "a1b22c333d4444", "ſ's 'S 'ſ", "😀😀 ok!!\n\n"])
def test_examples(text):
    for pattern in FAMILIES.values():
        check(pattern, text)


@pytest.mark.parametrize("pattern,what", [("(?<=a)b", "look-behind"), ("a(?=bc)", "lookahead longer"),
                                          ("^a", "anchors"), ("(a)\\1", "back-references"), ("a*", "empty string"),
                                          ("a++", "possessive"), ("(?>ab)", "atomic")])
def test_unmodelled_syntax_is_refused_by_name(pattern, what):
    with pytest.raises(InputError, match=what):
        split.split_transducer(pattern)
