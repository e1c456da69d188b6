"""Walks for the decoder tests: equal masks across forms, and random mask-following walks
that must never meet an empty mask at a non-final state and must end at a final state."""

from __future__ import annotations

import random
from collections import deque

import numpy as np

from tokfst_cli.analysis.steering import token_steering
from tokfst_cli.errors import DisallowedTokenError


def accepts(dec, ids: list[int]) -> bool:
    """Does the decoder accept the token sequence (every step allowed, a final state at the end)?"""
    state = dec.initial()
    try:
        for t in ids:
            state = dec.advance(state, t)
    except DisallowedTokenError:
        return False
    return dec.is_final(state)


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
