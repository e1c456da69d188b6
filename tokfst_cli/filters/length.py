"""The token-count filter ``max_tokens`` (Pitfalls 2025 App. B: the modular constraint Gamma^k).

F_N accepts the token sequences of at most N tokens; the pre-token boundary label does not count
(a self-loop at every state). Its states are the counts 0..N, with an arc k -> k+1 for every
token label: N x |V| arcs for the whole vocabulary, so F_N is written over the labels S actually
uses (``artifacts.fst_from_arrays``), per S, instead of cached.

Estimate, then build: the product's accessible states are the pairs (s, k) with s reachable from
S's start by exactly k tokens, k <= N. Their number is counted layer by layer over S's distinct
state-to-state edges (numpy; a layer repeats periodically once it equals an earlier one, which
finishes the count in closed form), so a product past ``max_states`` is refused before it is
built, and an S without any path longer than N tokens (layer N+1 empty) is returned unchanged.

Without the product (:class:`Counted`): a decoder walks S itself and carries the number k of
tokens taken; token t is allowed at (s, k) iff S allows it and its next state s' has a final
state within N - k - 1 more tokens (:func:`fewest`, one shortest-distance pass). That is
S ∩ F_N state for state, so a decoder or an index needs no N-times-larger automaton; the
materialized acceptor is made only where it is asked for (:meth:`Counted.materialize`).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

import numpy as np
import pynini

from tokfst_cli.automata.arrays import FstArrays, fst_arrays, fst_from_arrays, unique
from tokfst_cli.automata.graph import backward, distinct_edges
from tokfst_cli.decoding.matcher import Steps, int_state, token_id
from tokfst_cli.errors import DisallowedTokenError, ForeignStateError, LimitError, UsageError

STAGE = "the product with the token-count filter"






def layers(a: FstArrays, n: int, marker: int | None, max_states: int,
           edges: tuple[np.ndarray, np.ndarray] | None = None) -> int | None:
    """The accessible states of S x F_n; None when S has no path of more than ``n`` tokens.
    LimitError (at least) past ``max_states``. ``edges``: S's distinct token edges, if known
    (no marker)."""
    size = len(a.final)
    boundary = a.ilabel == marker if marker is not None else np.zeros(len(a.ilabel), bool)
    t_src, t_dst = (edges if edges is not None and marker is None
                    else distinct_edges(a.src[~boundary], a.nextstate[~boundary], size))
    m_src, m_dst = distinct_edges(a.src[boundary], a.nextstate[boundary], size)

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
    labels = unique(a.ilabel)
    return pynini.intersect(fst, counter(labels[labels != marker] if marker is not None else labels, n, marker))


FAR = 1 << 60  # fewest() of a state without a final state after it
FEW_EDGES = 2048  # up to this many distinct edges, fewest() searches in Python


def fewest(num_states: int, final: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Per state, the fewest tokens (arcs src -> dst) to a final state, FAR where there is none:
    the shortest distance over S's distinct state-to-state edges, each weighing 1; OpenFst's
    reverse shortest distance, or for few edges, whose cost pynini's fixed costs (~0.2 ms)
    would dominate, the breadth-first search of ``steering.backward``."""
    if num_states == 0:
        return np.zeros(0, np.int64)
    s, d = distinct_edges(np.asarray(src, np.int64), np.asarray(dst, np.int64), num_states)
    if len(s) <= FEW_EDGES:
        back: list[list[int]] = [[] for _ in range(num_states)]
        for p, q in zip(s.tolist(), d.tolist()):
            back[q].append(p)
        return backward(back, np.asarray(final, bool), FAR)
    ones = np.ones(len(s), np.int64)
    g = pynini.arcmap(fst_from_arrays(num_states, 0, final, s, ones, ones, d), map_type="times", weight=1)
    dist = np.array([float(w) for w in pynini.shortestdistance(g, reverse=True)], float)
    dist = np.concatenate([dist, np.full(num_states - len(dist), np.inf)]) - 1  # final weights were made 1 too
    return np.where(np.isfinite(dist), dist, FAR).astype(np.int64)


class Counted:
    """S ∩ F_N kept as S and N (Pitfalls 2025 App. B's Gamma^k without the product): ``fst`` is S (a
    deterministic, trimmed token acceptor, labels id + 1, no boundary labels), ``limit`` is N.
    An S without a sequence of at most N tokens is :meth:`empty` (the pipeline refuses it:
    EmptyLanguageError)."""

    def __init__(self, fst: pynini.Fst, limit: int, arrays: FstArrays | None = None):
        self.fst, self.limit = fst, limit
        self.arrays = a = arrays if arrays is not None else fst_arrays(fst)
        self.fewest = fewest(len(a.final), a.final, a.src, a.nextstate)

    def empty(self) -> bool:
        return len(self.fewest) == 0 or self.fst.start() < 0 or int(self.fewest[self.fst.start()]) > self.limit

    def materialize(self, max_states: int) -> pynini.Fst:
        """The minimal acceptor of S ∩ F_N (LimitError past ``max_states``, before it is built)."""
        out = restrict(self.fst, self.limit, None, max_states)
        if out is None:
            return self.fst
        out.minimize()
        return out.set_input_symbols(self.fst.input_symbols()).set_output_symbols(self.fst.output_symbols())

    def decoder(self, base) -> CountedDecoder:
        """The per-step decoder over ``base``, S's own decoder (``constraint.FstDecoder``)."""
        return CountedDecoder(base, self.limit, self.fewest)


class CountedDecoder(Steps):
    """The decoder of S ∩ F_N over S's decoder ``base`` (an index or a materialized acceptor,
    without terminal labels): state ``k * n + s`` is S's state s after k tokens (n: S's states).
    Per state s of S, ``top`` (made at load, one vectorized pass): the largest fewest-tokens of
    its next states; a budget of at least ``top`` keeps S's own mask, so a step there is S's
    lookup. A budget below it binds: the state's binding budgets and each one's packed mask (S's
    row with the dropped tokens' bits cleared) are made on the first step that needs them and
    kept. The budget binds only in the last steps of a sequence, so the load stays a few numpy
    calls (the filter's cost on small automata).

    ``fewest_`` and ``top`` may also be tables found on demand (``promotion.counted_lazy``: S is
    never built), indexed as the arrays by a state or an array of states; ``top`` may then be an
    upper bound of each state's largest fewest-tokens (a budget below it is checked token by token)."""

    def __init__(self, base, limit: int, fewest_: np.ndarray, top: Any = None):
        if getattr(base, "terminals", None):
            raise UsageError("a token-count budget over terminal labels")  # refused earlier: check_options
        self.base, self.limit, self.n = base, limit, len(fewest_)
        self.vocab_size, self.healing = base.vocab_size, base.healing
        self.fewest = fewest_
        self._fewest = fewest_.tolist() if isinstance(fewest_, np.ndarray) else fewest_
        self._cuts: dict[int, tuple[list[int], list[np.ndarray]]] = {}  # s -> (binding budgets, masks made)
        self._empty = np.zeros((self.vocab_size + 31) // 32, "<i4")  # pack() of no token
        self._empty.setflags(write=False)
        if top is None:
            nexts, noff = base._nexts, np.asarray(base._noff)
            top = np.full(self.n, -1, np.int64)
            if len(nexts):
                some = noff[1:] > noff[:-1]
                top[some] = np.maximum.reduceat(fewest_[nexts], noff[:-1][some])
            top = top.tolist()
        self._top = top

    def _binding(self, s: int) -> tuple[list[int], list[np.ndarray]]:
        """The budgets below ``top`` that some next state's fewest equals (sorted), and their masks so far."""
        got = self._cuts.get(s)
        if got is None:
            far = self.fewest[self.base.arcs(s)[1]]
            got = self._cuts[s] = (unique(far[far < self._top[s]]).tolist(), [])
        return got

    def _mask(self, s: int, budget: int) -> np.ndarray:
        """S's packed row at s without the tokens whose next state needs more than ``budget`` tokens."""
        labels, nexts = self.base.arcs(s)
        drop = labels[self.fewest[nexts] > budget].astype(np.int64)
        words = np.array(self.base.bitmask(s)).view(np.uint32)  # a copy
        np.bitwise_and.at(words, drop >> 5, ~np.left_shift(np.uint32(1), (drop & 31).astype(np.uint32)))
        out = words.view("<i4")
        out.setflags(write=False)
        return out

    def initial(self) -> int:
        return self.base.initial()

    def is_state(self, state: Any) -> bool:
        return int_state(state, (self.limit + 1) * self.n)

    def _checked(self, state: Any) -> int:
        """``state`` as an int, or ForeignStateError (the fast path: one type check, one comparison)."""
        if type(state) is not int or not 0 <= state < (self.limit + 1) * self.n:
            if not self.is_state(state):
                raise ForeignStateError(state, type(self).__name__)
            state = int(state)
        return state

    def arcs(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (sorted) and next states of ``state``."""
        state = self._checked(state)
        k, s = divmod(state, self.n)
        labels, nexts = self.base.arcs(s)
        keep = self.fewest[nexts] <= self.limit - k - 1
        return labels[keep], nexts[keep] + (k + 1) * self.n

    def mask(self, state: int) -> np.ndarray:
        m = np.zeros(self.vocab_size, bool)
        m[self.arcs(state)[0]] = True
        return m

    def bitmask(self, state: int) -> np.ndarray:
        """``mask(state)`` as packed int32 words (read-only): S's own where the budget does not bind."""
        state = self._checked(state)
        k, s = divmod(state, self.n)
        left = self.limit - k - 1
        if left >= self._top[s]:
            return self.base.bitmask(s)
        budgets, masks = self._binding(s)
        i = bisect_right(budgets, left) - 1
        if i < 0:
            return self._empty
        while len(masks) <= i:
            masks.append(self._mask(s, budgets[len(masks)]))
        return masks[i]

    def advance(self, state: int, token: int) -> int:
        if type(token) is not int or not 0 <= token < self.vocab_size:
            token = token_id(token, self.vocab_size)
        state = self._checked(state)
        k, s = divmod(state, self.n)
        try:
            nxt = self.base.advance(s, token)
        except DisallowedTokenError:
            raise DisallowedTokenError(token, state) from None
        if self._fewest[nxt] > self.limit - k - 1:
            raise DisallowedTokenError(token, state)
        return (k + 1) * self.n + nxt

    def is_final(self, state: int) -> bool:
        state = self._checked(state)
        return self.base.is_final(state % self.n)
