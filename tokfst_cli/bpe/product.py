"""Stage C for BPE: canonical filtering with the implicit A_BPE (Cognetta & Okazaki 2024 Eq. 5, Sec. 6.5;
Pitfalls 2025 Sec. 3.3).

Materialized: the product of the agnostic token acceptor S = MIN(PROJ(A o T)) (stage S) with the implicit
A_BPE, whose state is (class of the last token, byte-fallback DFA state); only reachable pairs
are built, each state's allowed tokens are one numpy mask, and OpenFst minimizes the result.

Factorized: S and the implicit A_BPE side by side, combined at lookup time:
mask(p, s) = allowed(p) minus BANNED(s), next((p, s), v) = (delta_S(p, v), step(s, v)).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pynini

from tokfst_cli.automata.arrays import fst_arrays, fst_from_arrays, unique
from tokfst_cli.automata.bitsets import as_int32, as_words
from tokfst_cli.bpe.explicit import START, ignore_merges_correction
from tokfst_cli.bpe.implicit import ImplicitBpe
from tokfst_cli.bpe.liveness import compute
from tokfst_cli.bpe.word import Word, stepper
from tokfst_cli.decoding.index import by_label
from tokfst_cli.decoding.matcher import Steps, check_state, int_state, token_id, unpack
from tokfst_cli.errors import DisallowedTokenError, EmptyLanguageError, LimitError

State = tuple[int, int, int, int]  # (state of S, class of last token | START | WHOLE, fallback state, trie node)


def sorted_arcs_reader(fst: pynini.Fst) -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
    """state -> (token ids sorted, next states), read in bulk (``artifacts.fst_arrays``, ``index.by_label``)."""

    a = fst_arrays(fst)
    bounds, label, dst = by_label(a.src, a.ilabel - 1, a.nextstate, len(a.final))
    return lambda p: (label[bounds[p]:bounds[p + 1]], dst[bounds[p]:bounds[p + 1]])


def materialize(agnostic: pynini.Fst, imp: ImplicitBpe, max_arcs: int = 2_000_000) -> pynini.Fst:
    """MIN(S x A_BPE) over the reachable part; LimitError past ``max_arcs``.

    Two phases: a vectorized exploration that numbers the reachable (p, class, fallback) states
    and counts arcs (stopping early past ``max_arcs``, before any arc is built), then the Fst.
    """
    step = stepper(imp)
    arcs = sorted_arcs_reader(agnostic)
    zero = pynini.Weight.zero(agnostic.weight_type())
    n_fb = len(imp.fb_final)
    n_cls = int(step.classes.max()) + 2  # classes and START (-1 -> 0)
    width = n_cls * n_fb

    def key(p, cls, fb):
        return (p * n_cls + (cls + 1)) * n_fb + fb

    start = key(agnostic.start(), START, 0)
    ids = {start: 0}
    order = [start]
    kept: list[tuple[np.ndarray, np.ndarray]] = []
    total = 0
    i = 0
    while i < len(order):
        k = order[i]
        i += 1
        p, rest = divmod(k, width)
        c, fb = divmod(rest, n_fb)
        labels, targets = arcs(p)
        if len(labels):
            keep = step.mask(c - 1, fb)[labels]
            labels, targets = labels[keep], targets[keep]
        total += len(labels)
        if total > max_arcs:
            raise LimitError("the canonical automaton", "max_arcs", max_arcs, remedy="factorized")
        keys = (targets * n_cls + step.classes[labels] + 1) * n_fb + step.next_fb(fb)[labels]
        for u in unique(keys).tolist():
            if u not in ids:
                ids[u] = len(order)
                order.append(u)
        kept.append((labels, keys))
    known = np.array(order, np.int64)
    sort = np.argsort(known)
    p_of, rest = np.divmod(known, width)
    c_of, fb_of = np.divmod(rest, n_fb)
    final_p = np.array([agnostic.final(int(p)) != zero for p in range(agnostic.num_states())])
    finals = final_p[p_of] & np.array([step.final(int(c) - 1, int(g)) for c, g in zip(c_of, fb_of)])
    src = np.repeat(np.arange(len(order)), [len(lab) for lab, _ in kept])
    labels = np.concatenate([lab for lab, _ in kept]) if kept else np.zeros(0, np.int64)
    keys = np.concatenate([k for _, k in kept]) if kept else np.zeros(0, np.int64)
    dst = sort[np.searchsorted(known, keys, sorter=sort)]
    f = fst_from_arrays(len(order), 0, finals, src, labels + 1, labels + 1, dst)
    f.connect()
    if imp.derived.get("replaced"):
        first = {a.ilabel: a.nextstate for a in agnostic.arcs(agnostic.start())}
        f = ignore_merges_correction(f, imp, lambda w: (w + 1) in first and agnostic.final(first[w + 1]) != zero)
    if f.num_states() == 0:
        raise EmptyLanguageError("no canonical token sequence spells a string of this language",
                                 "every matching string tokenizes through other paths; check the regex")
    f.minimize()
    f.set_input_symbols(agnostic.input_symbols()).set_output_symbols(agnostic.output_symbols())
    return f


def is_member(state: Any, nstates: int) -> bool:
    """Is ``state`` a product state (p, class, fallback state, ignore_merges node) with p one of
    ``nstates`` states of S (the shape :meth:`Factorized.is_state` and its kin check)?"""
    return (type(state) is tuple and len(state) == 4 and int_state(state[0], nstates)
            and all(isinstance(x, (int, np.integer)) for x in state[1:]))


class Factorized(Steps):
    """The agnostic automaton and the implicit A_BPE, combined at lookup time (Python API).

    Per-state arrays of S are read on first use. Only tokens after which a canonical completion
    exists are offered: the co-reachability table (``liveness``) is computed here, or read by
    ``live(word, arcs)``.
    """

    def __init__(self, arcs, finals: np.ndarray, start: int, imp: ImplicitBpe, live=None, limit: int | None = None):
        self._arcs = arcs  # state -> (sorted token ids, next states), or a function computing it
        self.finals = finals
        self.start = start
        self.imp = imp
        self.vocab_size = imp.vocab_size
        self.word = Word(imp)
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.live = (live(self.word, self.arcs3) if live is not None
                     else compute(self.word, self.arcs3, finals, start, limit=limit))

    def arcs(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        got = self._cache.get(p)
        if got is None:
            got = self._cache[p] = self._arcs(p)
        return got

    def arcs3(self, p: int) -> tuple[np.ndarray, np.ndarray, int]:
        return (*self.arcs(p), -1)

    @property
    def masks(self) -> list[np.ndarray]:
        return [self.arcs(p)[0] for p in range(len(self.finals))]

    @property
    def nexts(self) -> list[np.ndarray]:
        return [self.arcs(p)[1] for p in range(len(self.finals))]

    def initial(self) -> State:
        return (self.start, START, 0, 0)

    def is_state(self, state: Any) -> bool:
        return is_member(state, len(self.finals))

    def mask(self, state: State) -> np.ndarray:
        """Bool mask over token ids: the tokens after which a canonical completion exists."""
        return unpack(self.bitmask(state), self.imp.vocab_size)

    def bitmask(self, state: State, out: np.ndarray | None = None) -> np.ndarray:
        """``mask(state)`` as packed int32 words: written into ``out`` (int32, one word per 32
        token ids) if given, else a new or shared read-only array."""
        try:
            return as_int32(self.live.words((state,), as_words(out)))
        except Exception:
            check_state(self, state)
            raise

    def advance(self, state: State, token: int) -> State:
        if type(token) is not int or not 0 <= token < self.vocab_size:
            token = token_id(token, self.vocab_size)
        try:
            p, cls, fb, node = state
            labels, nexts = self.arcs(p)
            i = int(np.searchsorted(labels, token))
            if not (i < len(labels) and labels[i] == token and self.word.allows(cls, fb, token)
                    and self.live.live_next(p, cls, fb, node)[i]):
                raise DisallowedTokenError(token, state)
            return (int(nexts[i]), *self.word.after_one(cls, fb, node, token))
        except Exception:
            check_state(self, state)
            raise

    def is_final(self, state: State) -> bool:
        try:
            p, cls, fb, node = state
            return bool(self.finals[p]) and self.word.ends(cls, fb, node)
        except Exception:
            check_state(self, state)
            raise




