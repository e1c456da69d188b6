"""Differential tests of agnostic promotion (Cognetta & Okazaki 2024 Eq. 3) against Hugging Face on real tokenizers.

For each of GPT-2, Llama-2 and BERT and each of the six regexes of issue #2:
- HF's model tokenization of >= 200 strings sampled from L(regex) is accepted;
- >= 200 random accepted token paths spell strings of L(regex);
- for the finite languages, the accepted sequences are exactly all segmentations.
"""

from __future__ import annotations

import pynini
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli.errors import EmptyLanguageError
from tokfst_cli.promotion.promote import _with_terminals, promote, remove_trie_epsilons
from tokfst_cli.text.regex import compile_regex

from .conftest import real, words100
from .helpers import (
    SIX_REGEXES,
    accepts,
    add_words_regex,
    count_segmentations,
    enumerate_paths,
    finals,
    fullmatch,
    hf_model_ids,
    isomorphic,
    sample_paths,
    segmentation_lattice,
    segmentations,
    spell,
    surface_index,
    transitions,
)

N = 200
REGEXES = add_words_regex(SIX_REGEXES, words100())
FINITE = ("json", "cities", "words100")
# BERT uncased has no upper-case letters: these languages cannot be spelled with its tokens.
UNSPELLABLE = {("bert", "json"), ("bert", "cities")}
CASES = [(t, r) for t in ("gpt2", "llama2", "bert") for r in REGEXES if (t, r) not in UNSPELLABLE]
FINITE_CASES = [(t, r) for (t, r) in CASES if r in FINITE]


def _promoted(tok: str, name: str):
    model, lex, hf = real(tok)
    automaton = compile_regex(REGEXES[name])
    return model, hf, automaton, promote(model, automaton, lex)


def _sample_strings(automaton, n: int, seed: int) -> list[str]:
    paths = sample_paths(automaton.fst, n, seed=seed)
    return [bytes(b - 1 for b in p).decode("utf-8") for p in paths]


@pytest.mark.parametrize("tok,name", CASES)
def test_hf_tokenization_of_sampled_strings_is_accepted(tok, name):
    model, hf, automaton, result = _promoted(tok, name)
    delta, fin = transitions(result.fst), finals(result.fst)
    texts = _sample_strings(automaton, N, seed=hash((tok, name)) & 0xFFFF)
    assert len(texts) >= N
    unk = model.token_id(model.options.get("unk_token") or "") if model.options.get("unk_token") else None
    checked = 0
    for text in texts:
        assert fullmatch(REGEXES[name], text.encode())
        ids = hf_model_ids(hf, model, text)
        assert unk not in ids, f"HF produced unk for {text!r}"
        assert spell(model, ids) == text.encode("utf-8")
        assert accepts(result.fst, [i + 1 for i in ids], delta, fin), (text, ids)
        checked += 1
    assert checked >= N


@pytest.mark.parametrize("tok,name", CASES)
def test_sampled_token_paths_spell_the_language(tok, name):
    model, _, _, result = _promoted(tok, name)
    paths = sample_paths(result.fst, N, seed=7)
    assert len(paths) >= N
    for p in paths:
        assert fullmatch(REGEXES[name], spell(model, [x - 1 for x in p])), p


@pytest.mark.parametrize("tok,name", FINITE_CASES)
def test_finite_language_is_exactly_all_segmentations(tok, name):
    """Equal to an independently built segmentation lattice, and by enumeration where small."""
    model, _, automaton, result = _promoted(tok, name)
    pieces = surface_index(model)
    strings = [bytes(b - 1 for b in p) for p in enumerate_paths(automaton.fst)]
    assert pynini.equivalent(result.fst, segmentation_lattice(strings, pieces))
    total = sum(count_segmentations(s, pieces) for s in strings)
    if total <= 300_000:
        expected = set().union(*(segmentations(s, pieces) for s in strings))
        got = {tuple(x - 1 for x in p) for p in enumerate_paths(result.fst)}
        assert got == expected and len(got) == total


def test_enumeration_runs_on_some_real_finite_language(tokenizer):
    """Guard against the enumeration branch above never running."""
    model = tokenizer("gpt2")
    pieces = surface_index(model)
    assert sum(count_segmentations(w.encode(), pieces) for w in words100()) <= 300_000


@pytest.mark.parametrize("name", ["json", "cities"])
def test_unspellable_languages_are_reported(tokenizer, name):
    """An uncased vocabulary cannot spell 'John': tokfst reports the empty language, and HF's
    WordPiece agrees by producing [UNK] for every sampled string's capitalised words."""
    model, lex, hf = tokenizer("bert"), tokenizer.lexicon("bert"), tokenizer.hf("bert")
    automaton = compile_regex(REGEXES[name])
    with pytest.raises(EmptyLanguageError):
        promote(model, automaton, lex)
    unk = model.token_id(model.options["unk_token"])
    for text in _sample_strings(automaton, N, seed=3):
        assert unk in hf_model_ids(hf, model, text)


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
def test_result_is_minimal_without_minimize(tokenizer, tok):
    """Skipping MIN is sound for vocabularies holding every byte (promote's docstring argument)."""
    model, lex = tokenizer(tok), tokenizer.lexicon(tok)
    for pattern in list(REGEXES.values()) + [r"[^\"]*", r"(ab|ba)*c?", r".{0,3}x"]:
        automaton = compile_regex(pattern)
        plain = promote(model, automaton, lex)
        assert not plain.minimized
        forced = promote(model, automaton, lex, force_minimize=True)
        assert (plain.states, plain.arcs) == (forced.states, forced.arcs)


PIECES = ["a", "b", "é", "中", ".", "[ab]", "[^a]", "ab", "(?:ab|c)", "[0-9]", '"[^"]*"', "[a-z]+", " ", "x{2,3}"]


@st.composite
def _patterns(draw, depth: int = 2) -> str:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(PIECES))
    parts = draw(st.lists(_patterns(depth - 1), min_size=1, max_size=3))
    joined = draw(st.sampled_from(["".join, "|".join]))(parts)
    return f"(?:{joined}){draw(st.sampled_from(['', '*', '?', '+']))}"


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
@given(pattern=_patterns(), with_terminals=st.booleans(), block=st.sampled_from([1, 3, 1 << 14]))
@settings(max_examples=25, deadline=None)
def test_trie_epsilon_removal_is_openfsts(tokenizer, tok, pattern, with_terminals, block):
    """promote's numpy epsilon removal of PROJ(A o T) gives OpenFst's rmepsilon, state for state
    (isomorphic), with and without terminal labels and whatever the block of token states."""
    model, lex = tokenizer(tok), tokenizer.lexicon(tok)
    a = compile_regex(pattern).fst
    if with_terminals:
        a, lex, _ = _with_terminals(model, a, lex, True, True)
    c = pynini.compose(a.copy().arcsort("olabel"), lex, connect=True).project("output")
    ours, theirs = remove_trie_epsilons(c.copy(), block), c.copy().rmepsilon()
    assert ours.properties(pynini.NO_EPSILONS, True) == pynini.NO_EPSILONS
    assert isomorphic(ours.arcsort(), theirs.arcsort()), pattern


def test_other_epsilon_shapes_go_to_openfst():
    """An epsilon cycle and a final state reached by epsilons only are no trie walk: OpenFst's result."""
    for arcs, final in (([(0, 0, 1), (1, 0, 0), (1, 5, 2)], 2), ([(0, 0, 1), (0, 3, 2), (2, 4, 0)], 1)):
        f = pynini.Fst()
        one = pynini.Weight.one(f.weight_type())
        f.add_states(3)
        f.set_start(0)
        f.set_final(final)
        for src, label, dst in arcs:
            f.add_arc(src, pynini.Arc(label, label, one, dst))
        ours = remove_trie_epsilons(f.copy())
        assert pynini.equivalent(ours, f.copy().rmepsilon()) and ours.properties(pynini.NO_EPSILONS, True)


def test_weighted_epsilons_go_to_openfst():
    """A weight on a trie's epsilon arc (the walk would drop it) is summed by OpenFst's rmepsilon."""
    f = pynini.Fst()
    f.add_states(4)
    f.set_start(0)
    f.set_final(0)
    one = pynini.Weight.one(f.weight_type())
    for src, label, weight, dst in ((0, 0, 1.5, 1), (1, 5, 0, 2), (2, 0, 0, 3), (3, 6, 0, 0)):
        f.add_arc(src, pynini.Arc(label, label, pynini.Weight(f.weight_type(), weight) if weight else one, dst))
    ours = remove_trie_epsilons(f.copy())
    assert isomorphic(ours, f.copy().rmepsilon())
    assert [float(a.weight) for a in ours.arcs(ours.start())] == [1.5]
