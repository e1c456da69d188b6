"""Masks without dead ends for WordPiece (item 1): the lazy canonical MaxMatch machine
offers exactly the materialized (trimmed) automaton's masks at every reachable state, and random
mask-following walks never meet an empty mask at a non-final state."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli import pipeline
from tokfst_cli.analysis.steering import text_steering
from tokfst_cli.constraint import FstDecoder
from tokfst_cli.errors import DisallowedTokenError
from tokfst_cli.text import catalogue

from ..conftest import budget, real
from ..walks import equal_masks, walks

PATTERNS = {**catalogue.FOUNDATION, **catalogue.MAXMATCH,
            "prefixes": "(unaffable|unaff|una|un)( (playing|play|pla))?"}  # pieces that leave no greedy rest


@pytest.mark.parametrize("key", list(PATTERNS))
def test_no_dead_ends_and_masks_equal(key):
    model = real("bert")[0]
    pattern = PATTERNS[key]
    fac = pipeline.build(model, pattern, canonical=True, limits=pipeline.Limits(max_arcs=0))
    machine = fac.decoder()
    try:
        mat = pipeline.build(model, pattern, canonical=True, factorized_ok=False,
                             limits=pipeline.Limits(max_arcs=300_000))
    except Exception:  # too big to materialize here: the walks alone check the lazy form
        mat = None
    if mat is not None:
        assert equal_masks(FstDecoder(mat.fst, model.vocab_size), machine, 150) > 0
    walks(machine, budget(10_000), seed=len(key), closer=text_steering(machine))


@pytest.mark.parametrize("pattern", ["unaffable", "(Cologne|Berlin|Bonn|Munich)"])
def test_a_dead_piece_is_refused(pattern):
    """A word-initial piece shorter than the greedy one (e.g. 'un' in 'unaffable', 'co' in 'cologne')
    leaves no greedy rest: it is a raw successor but neither offered nor accepted."""
    model = real("bert")[0]
    m = pipeline.build(model, pattern, canonical=True, limits=pipeline.Limits(max_arcs=0)).decoder()
    ref = FstDecoder(pipeline.build(model, pattern, canonical=True).fst, model.vocab_size)
    s, r = m.initial(), ref.initial()
    raw = set(m.successors(s))
    offered = set(np.flatnonzero(m.mask(s)).tolist())
    assert offered == set(np.flatnonzero(ref.mask(r)).tolist()) and offered < raw
    for t in sorted(raw - offered):
        with pytest.raises(DisallowedTokenError):
            m.advance(s, t)


@given(st.lists(st.sampled_from(["un", "una", "aff", "able", "play", "ing", "s", "##", "x", " "]),
                min_size=1, max_size=4), st.booleans())
@settings(max_examples=30, deadline=None)
def test_property_lazy_equals_materialized(parts, alternate):
    model = real("bert")[0]
    words = ["".join(parts), "".join(parts[::-1])] if alternate else ["".join(parts)]
    pattern = "(" + "|".join(w.replace(" ", "[ ]") for w in words) + ")( [a-z]{1,3})?"
    try:
        mat = pipeline.build(model, pattern, canonical=True)
    except Exception:
        return  # e.g. an empty canonical language
    fac = pipeline.build(model, pattern, canonical=True, limits=pipeline.Limits(max_arcs=0))
    assert equal_masks(FstDecoder(mat.fst, model.vocab_size), fac.decoder(), 300) > 0


@pytest.mark.parametrize("key", ["email", "punct"])
def test_text_after_is_the_text_state_of_advance(key):
    """Steering's shortcut: X's state after every allowed token equals that of the full step, at
    the states of 20 random walks (up to 300 allowed tokens each: word starts, ## pieces, [UNK]
    where the text allows it)."""
    model = real("bert")[0]
    m = pipeline.build(model, PATTERNS[key], canonical=True, limits=pipeline.Limits(max_arcs=0)).decoder()
    rng = np.random.default_rng(len(key))
    checked = 0
    for _ in range(20):
        state = m.initial()
        for _ in range(6):
            allowed = np.flatnonzero(m.mask(state))
            if not len(allowed):
                break
            some = allowed if len(allowed) <= 300 else rng.choice(allowed, 300, replace=False)
            for t in some.tolist():
                assert m.text_after(state, t) == m.advance(state, t)[0], (state, t)
            checked += len(some)
            state = m.advance(state, int(rng.choice(allowed)))
    assert checked > 1000
