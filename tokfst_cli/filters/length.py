"""The token-count filter ``max_tokens`` (seed 001 App. B: the modular constraint Gamma^k).

F_N accepts the token sequences of at most N tokens; the pre-token boundary label does not count
(a self-loop at every state). Its states are the counts 0..N, with an arc k -> k+1 for every
token label: N x |V| arcs for the whole vocabulary, so F_N is written over the labels S actually
uses (``artifacts.fst_from_arrays``), per S, instead of cached.

Estimate, then build: the product's accessible states are the pairs (s, k) with s reachable from
S's start by exactly k tokens, k <= N. Their number is counted layer by layer over S's distinct
state-to-state edges (numpy; a layer repeats periodically once it equals an earlier one, which
finishes the count in closed form), so a product past ``max_states`` is refused before it is
built, and an S without any path longer than N tokens (layer N+1 empty) is returned unchanged.
"""

from __future__ import annotations

import numpy as np
import pynini

from ..artifacts import FstArrays, fst_arrays, fst_from_arrays
from ..errors import LimitError

STAGE = "the product with the token-count filter"


def _edges(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    pairs = np.unique(src * n + dst)
    return pairs // n, pairs % n


def layers(a: FstArrays, n: int, marker: int | None, max_states: int) -> int | None:
    """The accessible states of S x F_n; None when S has no path of more than ``n`` tokens.
    LimitError (at least) past ``max_states``."""
    size = len(a.final)
    boundary = a.ilabel == marker if marker is not None else np.zeros(len(a.ilabel), bool)
    t_src, t_dst = _edges(a.src[~boundary], a.nextstate[~boundary], size)
    m_src, m_dst = _edges(a.src[boundary], a.nextstate[boundary], size)

    def closed(layer: np.ndarray) -> np.ndarray:  # the states reached from the layer by boundaries
        while True:
            more = m_dst[layer[m_src]]
            if layer[more].all():
                return layer
            layer[more] = True

    layer = np.zeros(size, bool)
    layer[a.start] = True
    layer = closed(layer)
    seen: dict[bytes, int] = {}
    sizes: list[int] = []
    total = 0
    for k in range(n + 2):
        if not layer.any():
            return None  # no path with k >= n + 1 tokens
        if k == n + 1:
            return total
        key = np.packbits(layer).tobytes()
        if key in seen:  # layers k, k+1, ... repeat layers j, j+1, ..., k-1
            j = seen[key]
            period, left = k - j, n + 1 - k
            return total + left // period * sum(sizes[j:k]) + sum(sizes[j:j + left % period])
        seen[key] = k
        sizes.append(int(layer.sum()))
        total += sizes[-1]
        if total > max_states:
            raise LimitError(STAGE, "max_states", max_states, total, remedy="simplify", at_least=True)
        nxt = np.zeros(size, bool)
        nxt[t_dst[layer[t_src]]] = True
        layer = closed(nxt)
    return total


def counter(labels: np.ndarray, n: int, marker: int | None) -> pynini.Fst:
    """F_n over ``labels`` (sorted token labels), ilabel-sorted."""
    ks = np.arange(n, dtype=np.int64)
    src = np.repeat(ks, len(labels))
    lab = np.tile(labels, n)
    dst = src + 1
    if marker is not None:
        every = np.arange(n + 1, dtype=np.int64)
        src, lab, dst = np.r_[src, every], np.r_[lab, np.full(n + 1, marker, np.int64)], np.r_[dst, every]
    return fst_from_arrays(n + 1, 0, np.ones(n + 1, bool), src, lab, lab, dst).arcsort("ilabel")


def restrict(fst: pynini.Fst, n: int, marker: int | None, max_states: int) -> pynini.Fst | None:
    """S ∩ F_n (not minimized), or None when S ∩ F_n = S."""
    a = fst_arrays(fst)
    states = layers(a, n, marker, max_states)
    if states is None:
        return None
    if states > max_states:
        raise LimitError(STAGE, "max_states", max_states, states, remedy="simplify", at_least=True)
    labels = np.unique(a.ilabel)
    return pynini.intersect(fst, counter(labels[labels != marker] if marker is not None else labels, n, marker))
