"""Stage S without composition (``trie``): A run over the token trie gives OpenFst's A o T.

- T's arcs in bulk spell every token (``trie.from_lexicon``);
- on GPT-2, Llama-2 and BERT (which lacks bytes, so the walk goes in rounds and trims), for
  random regexes and the bench's: the walked token automaton is isomorphic to
  connect(rmepsilon(PROJ(A o T))); over pre-tokenized text (T_M, the boundary label) too;
- A'' over T'' (terminal labels) too;
- the ``A o T`` limit counts the accessible states of the composition exactly.
"""

from __future__ import annotations

import numpy as np
import pynini
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tokfst_cli.automata.arrays import fst_arrays, fst_from
from tokfst_cli.errors import LimitError
from tokfst_cli.pretok import image
from tokfst_cli.promotion import lexicon, trie
from tokfst_cli.promotion.promote import _with_terminals, covers_all_bytes, promote
from tokfst_cli.text.regex import ByteAutomaton, compile_regex
from tokfst_cli.text.terminals import TERMINAL_BASE

from .helpers import SIX_REGEXES, isomorphic
from .test_promote import _patterns

TRIM = pynini.ACCESSIBLE | pynini.COACCESSIBLE


@pytest.mark.parametrize("tok", ["gpt2", "llama2", "bert"])
def test_trie_spells_every_token(tokenizer, tok):
    """T's arcs in bulk: each token's surface read from the root along inner arcs ends in one arc
    that emits it; ``all_bytes`` is ``covers_all_bytes``."""
    model = tokenizer(tok)
    t = trie.from_lexicon(tokenizer.lexicon(tok))
    rng = np.random.default_rng(0)
    items = model.lexicon_items()
    emitted = np.sort(t.token[t.token >= 0])
    assert (emitted == np.sort([i for i, _ in items])).all()  # every token once
    for k in rng.choice(len(items), 500, replace=False):
        tid, surface = items[k]
        node = t.root
        for j, b in enumerate(surface):
            arcs = np.arange(t.lo[node], t.hi[node])
            if j == len(surface) - 1:
                assert tid in t.token[arcs[t.labels[t.column[arcs]] == b + 1]].tolist()
            else:
                (inner,) = arcs[(t.labels[t.column[arcs]] == b + 1) & (t.token[arcs] < 0)]
                node = int(t.next[inner])
    assert t.all_bytes == covers_all_bytes(model)


def _composed(a: pynini.Fst, lex: pynini.Fst) -> pynini.Fst:
    c = pynini.compose(a.copy().arcsort("olabel"), lex, connect=True).project("output")
    return c.rmepsilon().connect().set_input_symbols(None).set_output_symbols(None)


def _walked(model, a: pynini.Fst, marked: bool = False, max_states: int = 1_000_000) -> pynini.Fst:
    arrays = trie.token_arcs(model, fst_arrays(a), max_states, marked, a.properties(TRIM, True) == TRIM,
                             lexicon.lexicon(model, marked=marked))
    assert arrays is not None
    return fst_from(arrays) if len(arrays.final) else pynini.Fst()


@pytest.mark.parametrize("tok", ["gpt2", "llama2", "bert"])
@given(pattern=_patterns())
@settings(max_examples=30, deadline=None)
@example(pattern="(?:ab|c)*é")
@example(pattern="(?:中)?(?:[0-9]|x{2,3})+")
def test_walk_is_the_composition(tokenizer, tok, pattern):
    model, lex = tokenizer(tok), tokenizer.lexicon(tok)
    a = compile_regex(pattern).fst
    ours, theirs = _walked(model, a), _composed(a, lex)
    assert isomorphic(ours.arcsort(), theirs.arcsort()), pattern


@pytest.mark.parametrize("tok", ["gpt2", "llama2", "bert"])
@pytest.mark.parametrize("name", sorted(SIX_REGEXES))
def test_walk_is_the_composition_on_bench_regexes(tokenizer, tok, name):
    model, lex = tokenizer(tok), tokenizer.lexicon(tok)
    a = compile_regex(SIX_REGEXES[name]).fst
    assert isomorphic(_walked(model, a).arcsort(), _composed(a, lex).arcsort()), name


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
@given(pattern=_patterns())
@settings(max_examples=15, deadline=None)
@example(pattern="(?:[a-z]+ )+")
def test_walk_over_pretokenized_text_is_the_composition(tokenizer, tok, pattern):
    """S_M: P's output (bytes and the pre-token boundary) over T_M's model texts."""
    model = tokenizer(tok)
    text = image.language(compile_regex(pattern).fst, image.for_model(model), 1_000_000, image.domain(model))
    ours, theirs = _walked(model, text, marked=True), _composed(text, lexicon.lexicon(model, marked=True))
    assert isomorphic(ours.arcsort(), theirs.arcsort()), pattern


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
@given(pattern=_patterns(), loops=st.booleans())
@settings(max_examples=20, deadline=None)
@example(pattern='"[^"]*"', loops=True)
@example(pattern='(?:"[^"]*"|[0-9])*', loops=True)
def test_walk_with_terminal_labels_is_the_composition(tokenizer, tok, pattern, loops):
    """A'' over T'' (terminal labels, Koo et al. 2024 Sec. 2.5.1): T made for this A, not kept."""
    model = tokenizer(tok)
    a, t, labels = _with_terminals(model, compile_regex(pattern).fst, tokenizer.lexicon(tok), loops, True)
    tries = [None]  # T'' read whole
    if labels:  # promote's way: the signed T's trie, kept, and one root arc per terminal
        j = np.arange(len(labels))
        tries.append(trie.with_root_arcs(trie.signed_trie(model), TERMINAL_BASE + j, model.vocab_size + 1 + j))
    theirs = _composed(a, t).arcsort()
    for given_trie in tries:
        arrays = trie.token_arcs(model, fst_arrays(a), 1_000_000, lexicon=t, keep=False, trie=given_trie)
        assert arrays is not None
        ours = fst_from(arrays) if len(arrays.final) else pynini.Fst()
        assert isomorphic(ours.arcsort(), theirs), pattern


@pytest.mark.parametrize("tok", ["gpt2", "bert"])
@given(pattern=_patterns())
@settings(max_examples=20, deadline=None)
def test_limit_counts_the_accessible_composition(tokenizer, tok, pattern):
    """The walk passes ``max_states`` exactly when A o T has more accessible states."""
    model, lex = tokenizer(tok), tokenizer.lexicon(tok)
    a = compile_regex(pattern).fst
    size = pynini.compose(a.copy().arcsort("olabel"), lex, connect=False).num_states()
    _walked(model, a, max_states=size)
    with pytest.raises(LimitError) as e:
        _walked(model, a, max_states=size - 1)
    assert e.value.stage == "A o T" and e.value.bound == size - 1


def test_a_given_t_is_the_one_walked(tokenizer):
    """A caller's T (here T with a word boundary arc, as ``bench paragraph`` builds its lattices)
    is walked, not the tokenizer's T kept from an earlier promotion."""
    model, lex = tokenizer("gpt2"), tokenizer.lexicon("gpt2")
    boundary = model.vocab_size + 7
    t = lex.copy()
    t.add_arc(t.start(), pynini.Arc(boundary, boundary, pynini.Weight.one(t.weight_type()), t.start()))
    a = pynini.accep("ab") + pynini.accep(f"[{boundary}]") + pynini.accep("cd")
    a = a.optimize()
    promote(model, compile_regex("ab"), lex)  # the tokenizer's T, kept
    got = promote(model, ByteAutomaton(a, "ab|cd"), t)
    assert isomorphic(got.fst.copy().arcsort(), _composed(a, t).arcsort())
    assert boundary in {arc.ilabel for s in got.fst.states() for arc in got.fst.arcs(s)}


def test_promote_walks_and_stays_minimal(tokenizer):
    """promote takes the walk for a plain regex: same states and arcs as composing, and OpenFst's
    composition still serves terminal labels."""
    model, lex = tokenizer("gpt2"), tokenizer.lexicon("gpt2")
    automaton = compile_regex(SIX_REGEXES["email"])
    got = promote(model, automaton, lex)
    assert got.arrays is not None and not got.minimized
    assert isomorphic(got.fst.copy().arcsort(), _composed(automaton.fst, lex).arcsort())
    assert (got.states, got.arcs) == (got.fst.num_states(), len(got.arrays.src))


def test_other_automata_go_to_openfst(tokenizer):
    """An automaton with epsilons, two arcs on one byte or a weight is no byte table: None (OpenFst composes)."""
    model = tokenizer("gpt2")
    union = pynini.accep("ab") | pynini.accep("ac")  # epsilon arcs from a new start
    twice = pynini.Fst()
    twice.add_states(3)
    twice.set_start(0)
    for s in (1, 2):
        twice.set_final(s)
        twice.add_arc(0, pynini.Arc(ord("a") + 1, ord("a") + 1, pynini.Weight.one("tropical"), s))
    weighted = pynini.accep("ab")
    weighted.set_final(weighted.num_states() - 1, 2.0)
    for f in (union, twice, weighted):
        assert trie.token_arcs(model, fst_arrays(f), 100) is None
