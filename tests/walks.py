"""Walks for the decoder tests (issue #12): equal masks across forms, and random mask-following walks
that must never meet an empty mask at a non-final state and must end at a final state."""

from __future__ import annotations

import random
from collections import deque

import numpy as np


def equal_masks(reference, dec, limit: int) -> int:
    """Breadth-first over the pairs of states both decoders reach by the same tokens: equal masks and
    finality at each (up to ``limit`` pairs); the number of pairs compared."""
    seen = {(reference.initial(), dec.initial())}
    queue = deque(seen)
    n = 0
    while queue and n < limit:
        x, y = queue.popleft()
        n += 1
        mx, my = reference.mask(x), dec.mask(y)
        assert (mx == my).all(), (x, y, np.flatnonzero(mx != my)[:10])
        assert reference.is_final(x) == dec.is_final(y)
        for t in np.flatnonzero(mx)[:64].tolist():  # a sample of each state's tokens keeps it bounded
            pair = (reference.advance(x, t), dec.advance(y, t))
            if pair not in seen:
                seen.add(pair)
                queue.append(pair)
    return n


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
    dist = np.full(n, 1 << 30, np.int64)
    queue = deque(np.flatnonzero(finals).tolist())
    dist[list(queue)] = 0
    while queue:
        q = queue.popleft()
        for p in back[q]:
            if dist[p] > dist[q] + 1:
                dist[p] = dist[q] + 1
                queue.append(p)
    return arcs, dist


def members(state) -> list[int]:
    """The automaton states a decoder state stands for (a subset for the marked factorized form)."""
    if isinstance(state, frozenset):
        return [m[0] for m in state]
    return [state[0] if isinstance(state, tuple) else state]


def token_steering(dec):
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


def walks(dec, n: int, seed: int, random_len: int = 24, finish_len: int = 200, closer=None) -> int:
    """``n`` random mask-following walks: up to ``random_len`` uniform tokens (stopping at a final
    state with probability 1/2), then a completion that takes, among the allowed tokens, one
    leading closest to a final state, until it is final. Asserts that no step meets an empty mask
    at a non-final state and that every walk ends at a final state; returns the walks that needed
    a completion. Masks and steps are memoized per state, as a decoding loop revisiting a state."""
    rng = random.Random(seed)
    closer = closer or token_steering(dec)
    allowed: dict = {}
    closest: dict = {}
    step: dict = {}
    completed = 0
    for _ in range(n):
        state = dec.initial()
        for i in range(random_len + finish_len):
            toks = allowed.get(state)
            if toks is None:
                toks = allowed[state] = np.flatnonzero(dec.mask(state))
            final = dec.is_final(state)
            assert len(toks) or final, f"dead end at {state}"
            if final and (i >= random_len or not len(toks) or rng.random() < 0.5):
                break
            if i < random_len:
                t = int(toks[rng.randrange(len(toks))])
            else:
                best = closest.get(state)
                if best is None:
                    best = closest[state] = closer(state, toks)
                t = int(best[rng.randrange(len(best))])
            nxt = step.get((state, t))
            if nxt is None:
                nxt = step[(state, t)] = dec.advance(state, t)
            state = nxt
        else:
            raise AssertionError(f"no final state within {random_len + finish_len} tokens")
        completed += i >= random_len
    return completed
