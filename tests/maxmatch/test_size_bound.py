"""The size probe of canonical MaxMatch: a lower bound that only skips doomed attempts.

``product.size_lower_bound`` must never exceed what ``product.materialize`` enumerates, so the
materialized/factorized decision and every materialized output stay as they were; on the
catalogue's free-text regexes it must prove the overflow without the BFS.
"""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokfst_cli import pipeline
from tokfst_cli.automata.fst_io import fst_bytes
from tokfst_cli.errors import LimitError
from tokfst_cli.maxmatch import factorized, product
from tokfst_cli.text import catalogue
from tokfst_cli.text.regex import compile_regex

from .test_product import PIECE, small

LIMITS = pipeline.Limits(max_arcs=200_000)  # a tenth of the default: the same decisions, a tenth of the BFS
FREE_TEXT = {"email", "words4", "punct", "accents"}  # the BFS passes any limit on BERT (the largest other: 75,700 arcs)


def reachable(m: product.Canonical, cap: int = 20_000) -> dict:
    """state -> successors over the reachable part (the BFS of materialize, without limits)."""
    out: dict = {}
    queue = deque([m.initial()])
    seen = {m.initial()}
    while queue:
        s = queue.popleft()
        out[s] = m.successors(s)
        assert len(out) <= cap, "test language too big"
        for nxt in out[s].values():
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return out


@pytest.mark.parametrize("name", list(catalogue.maxmatch_set()))
def test_catalogue_decision_and_bytes_unchanged(name, tokenizer):
    """BERT, the six and the MaxMatch regexes: materialized -> the same bytes as the BFS alone;
    factorized -> the BFS alone raises too, and the probe (not the BFS) made the switch."""
    model = tokenizer("bert")
    pattern = catalogue.maxmatch_set()[name]
    text = pipeline.preprocess(model, pipeline.accept(pattern), canonical=True)
    try:
        before = fst_bytes(product.materialize(product.machine_of_text(model, text), LIMITS.max_states,
                                               LIMITS.max_arcs))
    except LimitError:
        before = None
    assert (before is None) == (name in FREE_TEXT)
    result = pipeline.build(model, pattern, canonical=True, limits=LIMITS)
    if before is None:
        assert not result.materialized and result.overflow.limit == "max_arcs"
        assert product.exceeds(result.lazy, LIMITS.max_states, LIMITS.max_arcs) is not None
        assert result.to_bytes() == factorized.to_bytes(product.machine_of_text(model, text), model, pattern)
    else:
        fst = result.fst.copy()
        fst.set_input_symbols(None)
        fst.set_output_symbols(None)
        assert fst_bytes(fst) == before
        assert product.exceeds(product.machine_of_text(model, text), LIMITS.max_states, LIMITS.max_arcs) is None


PATTERNS = [r"([abAé]|\.)+( [ab]+)?", r"[ab]+( [ab]+){0,2}", r"(ab|é)+\.?", r"a{1,7}( b)?", r"[abé. ]{0,6}"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initial=st.sets(PIECE, min_size=1, max_size=10), internal=st.sets(PIECE, max_size=10),
       max_chars=st.integers(2, 6), pattern=st.sampled_from(PATTERNS), max_states=st.integers(1, 120),
       max_arcs=st.integers(1, 600), budget=st.integers(1, 40))
def test_bound_is_a_lower_bound(initial, internal, max_chars, pattern, max_states, max_arcs, budget):
    """Random WordPiece vocabularies: the probe's counts never pass the BFS's, whenever it says
    "exceeds" the BFS raises, step gives the successors of the BFS (the proof's premise) and mask
    the live ones."""
    _, model = small(tuple(sorted(initial)), tuple(sorted(internal)), max_chars)
    machine = product.canonical_machine(model, compile_regex(pattern).fst, 100_000)
    graph = reachable(machine)
    for s, succ in graph.items():
        assert set(machine.mask(s).nonzero()[0].tolist()) == {t for t, n in succ.items() if machine.liveness.live(n)}
        assert all(machine.step(s, t) == (nxt, "") for t, nxt in succ.items())
    states, arcs = product.size_lower_bound(machine, max_states, max_arcs, budget)
    assert states <= len(graph) and arcs <= sum(map(len, graph.values()))
    if states > max_states or arcs > max_arcs or product.exceeds(machine, max_states, max_arcs) is not None:
        with pytest.raises(LimitError):
            product.materialize(product.canonical_machine(model, compile_regex(pattern).fst, 100_000),
                                max_states, max_arcs)
