"""Steering a walk toward a final state: the allowed tokens whose successor is nearest one.

A constraint's decoder offers only tokens after which a final state is reachable (no dead ends),
but a uniform random walk over free text may take very long to end (e-mail: "@" is one token
among thousands). :func:`steering` gives ``closer(state, allowed)``, the allowed tokens whose
next state is nearest a final state of the decoder's automaton: S or S_M for the factorized BPE
forms (canonical filtering may add detours, which the decoder's own mask keeps valid), the
acceptor itself for ``.fst`` and index, the text automaton X for WordPiece (on a sample of the
allowed tokens) and the byte DFA for the lazy form. ``tokfst sample`` steers the second half of
a factorized or lazy walk's budget; the decoder tests steer their walks' completions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tokfst_cli.automata.graph import backward

Closer = Callable[[object, np.ndarray], np.ndarray]


def arcs_of(dec):
    """p -> (token ids, next states, state after a boundary or -1) of a decoder's automaton, and
    its state count and finals (S or S_M for the factorized forms, the acceptor itself else)."""
    if hasattr(dec, "live"):
        three = dec.arcs3 if hasattr(dec, "arcs3") else dec.arcs
        return three, len(dec.finals), np.asarray(dec.finals, bool)
    seen, todo = {dec.initial()}, [dec.initial()]
    while todo:
        for q in dec.arcs(todo.pop())[1].tolist():
            if q not in seen:
                seen.add(q)
                todo.append(q)
    n = max(seen) + 1
    finals = np.array([p in seen and dec.is_final(p) for p in range(n)])
    return (lambda p: (*dec.arcs(p), -1) if p in seen else (np.zeros(0, np.int64),) * 2 + (-1,)), n, finals


def distances(dec) -> tuple:
    """Tokens to a final state of the decoder's automaton (a boundary counts as one), per state:
    the completion phase of :func:`walks` steers by it (canonical filtering may add detours)."""
    arcs, n, finals = arcs_of(dec)
    back: list[list[int]] = [[] for _ in range(n)]
    for p in range(n):
        labels, nexts, after = arcs(p)
        for q in set(nexts.tolist()) | ({after} if after >= 0 else set()):
            back[q].append(p)
    return arcs, backward(back, finals)






def members(state) -> list[int]:
    """The automaton states a decoder state stands for (a subset for the marked factorized form)."""
    if isinstance(state, frozenset):
        return [m[0] for m in state]
    return [state[0] if isinstance(state, tuple) else state]


def token_steering(dec) -> Closer:
    """closer(state, toks) for a token automaton (S, S_M, or a materialized acceptor): the allowed
    tokens whose next state is nearest a final state."""
    arcs, dist = distances(dec)

    def closer(state, toks: np.ndarray) -> np.ndarray:
        d = np.full(len(dec.mask(state)), 1 << 30, np.int64)
        for p in members(state):
            labels, nexts, _ = arcs(p)
            np.minimum.at(d, labels, dist[nexts])
        d = d[toks]
        return toks[d == d.min()]

    return closer


def text_steering(machine) -> Closer:
    """closer(state, toks) for the lazy WordPiece machine: allowed tokens (a sample of at most 64)
    whose next state of the text automaton X is nearest a final state."""
    n = len(machine.delta)
    back: list[list[int]] = [[] for _ in range(n)]
    for s, arcs in enumerate(machine.delta):
        for t in arcs.values():
            back[t].append(s)
    dist = backward(back, np.asarray(machine.finals, bool))

    def closer(state, toks: np.ndarray) -> np.ndarray:
        pick = toks[:: max(1, len(toks) // 64)]
        after = machine.text_after
        d = np.array([dist[after(state, t)] for t in pick.tolist()])
        return pick[d == d.min()]

    return closer


def byte_steering(dec) -> Closer:
    """closer(state, toks) for the lazy decoder (``lazy.LazyDecoder``, whose states are its byte
    DFA's): the allowed tokens after which the DFA is fewest bytes from a final state."""
    dist = dec.table.distances()

    def closer(state, toks: np.ndarray) -> np.ndarray:
        d = dist[dec.ends(state, toks)]  # allowed tokens: every end is a state
        return toks[d == d.min()]

    return closer


STACK_SAMPLE = 256  # allowed tokens a pushdown walk weighs per step


def stack_steering(dec) -> Closer:
    """closer(state, toks) for a pushdown decoder (``stack.PushdownDecoder``): among up to
    STACK_SAMPLE of the allowed tokens, those after which the fewest bytes end the text
    (``distance``: the current rule's exit plus every open frame's)."""
    rng = np.random.default_rng(0)

    def closer(state, toks: np.ndarray) -> np.ndarray:
        some = toks if len(toks) <= STACK_SAMPLE else rng.choice(toks, STACK_SAMPLE, replace=False)
        d = np.array([dec.distance(dec.advance(state, int(t))) for t in some])
        return some[d == d.min()]

    return closer


def steering(decoder) -> Closer:
    """The closer of any decoder of ``constraint.load``."""
    from tokfst_cli.bpe.counted import CountedFactorized  # deferred: start-up: only this path needs it
    from tokfst_cli.promotion.lazy import LazyDecoder  # deferred: start-up: only this path needs it
    from tokfst_cli.promotion.stack import PushdownDecoder  # deferred: start-up: only this path needs it

    if isinstance(decoder, LazyDecoder):
        return byte_steering(decoder)
    if isinstance(decoder, PushdownDecoder):
        return stack_steering(decoder)
    if hasattr(decoder, "delta") and hasattr(decoder, "pieces"):
        return text_steering(decoder)
    if isinstance(decoder, CountedFactorized):  # (state, tokens taken): steered as its factorized form
        inner = token_steering(decoder.base)
        return lambda state, toks: inner(state[0], toks)
    return token_steering(decoder)
