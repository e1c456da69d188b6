"""Canonical promotion: materialized and factorized forms against HF's BPE model."""

from __future__ import annotations

import random

import numpy as np
import pynini
import pytest

from tokfst_cli.bpe import implicit
from tokfst_cli.bpe.counted import factorize
from tokfst_cli.bpe.explicit import explicit_automaton
from tokfst_cli.bpe.gadgets import canonical_automaton, promote_gadgets
from tokfst_cli.bpe.product import materialize
from tokfst_cli.promotion.lexicon import build as build_lexicon
from tokfst_cli.promotion.promote import promote
from tokfst_cli.text.regex import compile_regex
from tokfst_cli.tokenizer import model as tokmod
from tokfst_cli.tokenizer.model import model_text
from tokfst_cli.tokenizer.reference import HfReference

from ..conftest import budget, words100
from ..helpers import (
    SIX_REGEXES,
    accepts,
    add_words_regex,
    distance_to_final,
    finals,
    fullmatch,
    sample_paths,
    transitions,
)
from .common import compiled, synthetic_tokenizer, trained_tokenizer

REGEXES = add_words_regex(SIX_REGEXES, words100())
MATERIALIZED = ["decimal", "json", "date", "cities", "words100"]
N = 500


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
@pytest.mark.parametrize("name", MATERIALIZED)
def test_materialized_canonical_automaton_is_hf(tokenizer, tok, name):
    model, imp, _ = compiled(tok)
    lex = tokenizer.lexicon(tok)
    ref = HfReference(model)
    automaton = compile_regex(REGEXES[name])
    canon = materialize(promote(model, automaton, lex).fst, imp)
    for path in sample_paths(canon, N, seed=4):  # every path re-tokenizes to itself
        ids = [x - 1 for x in path]
        assert ref.canonical(ids) == ids
        assert fullmatch(REGEXES[name], b"".join(model.surfaces[i] for i in ids))
    delta, fin = transitions(canon), finals(canon)
    for s in sample_paths(automaton.fst, N, seed=5):  # HF's tokenization of every sampled string is accepted
        text = bytes(b - 1 for b in s).decode()
        assert accepts(canon, [i + 1 for i in ref.tokenize_text(text)], delta, fin), text


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
def test_factorized_form_for_free_text(tokenizer, tok):
    """The e-mail regex is too big to materialize: walk the factorized form instead."""
    model, imp, _ = compiled(tok)
    lex = tokenizer.lexicon(tok)
    ref = HfReference(model)
    automaton = compile_regex(REGEXES["email"])
    fz = factorize(promote(model, automaton, lex).fst, imp)
    rng = random.Random(6)
    for s in sample_paths(automaton.fst, N, seed=7):
        text = bytes(b - 1 for b in s).decode()
        state = fz.initial()
        for t in ref.tokenize_text(text):
            assert fz.mask(state)[t]
            state = fz.advance(state, t)
        assert fz.is_final(state)
    dist = _distance_to_final(fz)
    walks = attempts = 0
    while walks < N:  # random canonical walks, steered toward final states, re-tokenize to themselves
        attempts += 1
        assert attempts < 20_000
        state, ids = fz.initial(), []
        for _ in range(40):
            if fz.is_final(state) and ids and rng.random() < 0.3:
                break
            allowed = np.flatnonzero(fz.mask(state))
            if not len(allowed):
                break
            p = state[0]
            labels, nexts = fz.arcs(p)
            closer = allowed[dist[nexts[np.searchsorted(labels, allowed)]] < dist[p]]
            ids.append(int(rng.choice(closer if len(closer) and rng.random() < 0.6 else allowed)))
            state = fz.advance(state, ids[-1])
        if fz.is_final(state) and ids:
            assert ref.canonical(ids) == ids
            walks += 1


def _distance_to_final(fz) -> np.ndarray:
    """Arcs to a final state of the agnostic automaton, per state."""
    succ = {p: sorted(set(fz.arcs(p)[1].tolist())) for p in range(len(fz.finals))}
    dist = distance_to_final(succ, np.flatnonzero(fz.finals).tolist())
    return np.array([dist[p] for p in range(len(fz.finals))])


def _small_cases(tmp_path):
    for ignore in (False, True):
        yield tokmod.load(synthetic_tokenizer(tmp_path, ignore)), ["(ab|ba)+c?", "[abc]{1,6}", "(x|y|z)+", "bca|b?ca",
                                                                   "(?s).*"]
    for opts in ({}, {"end_of_word_suffix": "</w>"}, {"continuing_subword_prefix": "##"}, {"ignore_merges": True}):
        path = trained_tokenizer(tmp_path, 300, **opts)
        yield tokmod.load(path), list(REGEXES.values()) + ["(?s).{0,4}", "[a-z]+"]


def test_implicit_precomputed_and_factorized_agree(tmp_path):
    for model, patterns in _small_cases(tmp_path):
        imp = implicit.compile_implicit(model).attach(model)
        lex = build_lexicon(model)
        abpe = explicit_automaton(imp, model)
        assert pynini.equivalent(abpe, canonical_automaton(model))  # A_BPE: implicit form = Eq. 4 on Sigma*
        gadgets = budget(len(patterns), floor=1)  # the gadget cascade (Eq. 4 per language) is the slow reference
        for k, pattern in enumerate(patterns):
            try:
                agnostic = promote(model, compile_regex(pattern), lex).fst
            except Exception:  # noqa: BLE001 - a trained vocabulary may not spell the language
                continue
            mat = materialize(agnostic, imp)
            _check_against_hf(model, pattern, mat)
            pre = pynini.intersect(agnostic.copy().arcsort("olabel"), abpe.copy().arcsort("ilabel")).connect()
            assert pynini.equivalent(mat, pre.minimize()), pattern  # Eq. 5 = implicit product
            if k < gadgets:
                assert pynini.equivalent(mat, promote_gadgets(compile_regex(pattern), model)), pattern  # = Eq. 4
            fz = factorize(agnostic, imp)
            assert pynini.equivalent(mat, _expand(fz)), pattern  # same language
            delta, fin = transitions(mat), finals(mat)  # and every materialized arc is allowed there
            seen, queue = set(), [(mat.start(), fz.initial())]
            while queue:
                q, st = queue.pop()
                if (q, st) in seen:
                    continue
                seen.add((q, st))
                assert (q in fin) == fz.is_final(st)
                assert {lab - 1 for lab in delta[q]} <= set(np.flatnonzero(fz.mask(st)).tolist())
                for lab, q2 in delta[q].items():
                    queue.append((q2, fz.advance(st, lab - 1)))


def _check_against_hf(model, pattern: str, mat: pynini.Fst) -> None:
    """HF's tokenizations of sampled strings are accepted; sampled paths are HF's tokenizations."""
    from tokenizers import Tokenizer

    hf = Tokenizer.from_file(model.source)
    text = lambda ids: "".join(model_text(model, t)[0] for t in ids)  # noqa: E731
    delta, fin = transitions(mat), finals(mat)
    unk = model.token_id("[UNK]")
    checked = 0
    for s in sample_paths(compile_regex(pattern).fst, 60, seed=8):
        ids = [t.id for t in hf.model.tokenize(bytes(b - 1 for b in s).decode())]
        if unk in ids:
            continue  # a character this small vocabulary lacks: no token path spells it
        assert accepts(mat, [t + 1 for t in ids], delta, fin), (pattern, ids)
        checked += 1
    assert checked or not mat.num_states()
    for path in sample_paths(mat, 60, seed=9):
        ids = [x - 1 for x in path]
        assert not ids or [t.id for t in hf.model.tokenize(text(ids))] == ids, (pattern, ids)


def _expand(fz) -> pynini.Fst:
    """The factorized form spelled out state by state (for small cases), trimmed and minimized."""
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    ids = {fz.initial(): f.add_state()}
    f.set_start(0)
    queue = [fz.initial()]
    while queue:
        st = queue.pop()
        if fz.is_final(st):
            f.set_final(ids[st])
        for t in np.flatnonzero(fz.mask(st)).tolist():
            nxt = fz.advance(st, t)
            if nxt not in ids:
                ids[nxt] = f.add_state()
                queue.append(nxt)
            f.add_arc(ids[st], pynini.Arc(t + 1, t + 1, one, ids[nxt]))
    return f.connect().minimize()
