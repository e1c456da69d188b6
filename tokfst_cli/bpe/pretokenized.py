"""Stage C for BPE on pre-tokenized text: A_BPE restarted at every pre-token boundary (Pitfalls 2025 Sec. 3.1, 3.3).

HF's ``encode`` runs the BPE model on each pre-token of P(text) alone, so a token sequence is
canonical for the whole pipeline iff it splits into runs, one per pre-token of some P(x), each
canonical for A_BPE as a whole word (Cognetta & Okazaki 2024 Sec. 6.5). Stage S over P's output gives
S_M = MIN(PROJ(Y o T_M)), Y = PROJ_out(A o P): token ids plus the boundary label (``marker``,
one past the last token id). The product keeps, next to S_M's state p, the per-word state
:class:`Word` of A_BPE: class of the last token (``START`` at a word start, ``WHOLE`` after a
token that ignore_merges allows only as a whole word), byte-fallback DFA state, and node in the
trie of the merge tokenizations ignore_merges replaces. A boundary is crossed only where the
word may end, and leads to a fresh word. The boundary is then erased (epsilon) and OpenFst
determinizes and minimizes (materialized), or the subset construction runs at lookup time
(:class:`MarkedFactorized`, the Python decoder). canonical-check's version, without S_M, is
:mod:`.pretokenized_check`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pynini

from tokfst_cli.automata.arrays import fst_from_arrays
from tokfst_cli.automata.bitsets import as_int32, as_words
from tokfst_cli.bpe.counted import counted
from tokfst_cli.bpe.implicit import ImplicitBpe
from tokfst_cli.bpe.liveness import compute
from tokfst_cli.bpe.product import is_member, sorted_arcs_reader
from tokfst_cli.bpe.word import DEAD, START, WHOLE, Word
from tokfst_cli.decoding.matcher import Steps, check_state, token_id, unpack
from tokfst_cli.errors import DisallowedTokenError, EmptyLanguageError, ForeignStateError, LimitError

Member = tuple[int, int, int, int]  # (state of S_M or R, class, fallback state, trie node)


def materialize(marked: pynini.Fst, imp: ImplicitBpe, marker: int, max_arcs: int = 2_000_000) -> pynini.Fst:
    """MIN(DET(erase boundary(S_M x A_BPE per word))); LimitError past ``max_arcs`` product arcs.

    ``marker`` is the boundary's token label (``lexicon.marker_label``); S_M's arcs carry id + 1.
    A label past it is a cut added token (``pretok.cut.cut_token``): taken only as a whole word,
    written as the added token's id.
    Product states are numbered by one int64 key (p, class, fallback state, trie node), so each
    state's successors are found with numpy; arcs are built in bulk at the end.
    """
    word = Word(imp)
    zero = pynini.Weight.zero(marked.weight_type())
    bound = marker - 1  # the boundary as a token id (one past the last token)
    n_cls, n_fb, n_node = int(word.classes.max()) + 3, len(imp.fb_final), word.nodes + 1

    def key(p, c, f, n):  # c: WHOLE -2, START -1, classes >= 0; n: DEAD -1, nodes >= 0
        return ((p * n_cls + (c + 2)) * n_fb + f) * n_node + (n + 1)

    def member(k: int) -> Member:
        k, n = divmod(k, n_node)
        k, f = divmod(k, n_fb)
        p, c = divmod(k, n_cls)
        return p, c - 2, f, n - 1

    arcs = sorted_arcs_reader(marked)
    ids = {key(marked.start(), START, 0, 0): 0}
    order = list(ids)
    src_l, lab_l, dst_l = [], [], []
    total = i = 0
    while i < len(order):
        p, c, fb, node = member(order[i])
        labels, targets = arcs(p)
        keys = np.zeros(0, np.int64)
        if len(labels) and labels[-1] > bound:  # cut added tokens (``pretok.cut``): a whole word each
            cut = labels > bound
            if c == START:
                src_l.append(np.full(int(cut.sum()), i))
                lab_l.append(labels[cut] - bound - 1)  # the added token's id
                keys = key(targets[cut], WHOLE, 0, DEAD)
            labels, targets = labels[~cut], targets[~cut]
        if len(labels) and labels[-1] == bound:
            if word.ends(c, fb, node):
                src_l.append(np.array([i]))
                lab_l.append(np.array([-1]))  # epsilon once shifted by one
                keys = np.concatenate([keys, np.array([key(int(targets[-1]), START, 0, 0)], np.int64)])
            labels, targets = labels[:-1], targets[:-1]
        if len(labels):
            keep = word.allowed(c, fb)[labels]
            labels, targets = labels[keep], targets[keep]
        total += len(labels) + len(keys)
        if total > max_arcs:
            raise LimitError("the canonical automaton", "max_arcs", max_arcs, remedy="factorized")
        cs, fs, ns = word.after(c, fb, node, labels)
        keys = np.concatenate([keys, key(targets, cs, fs, ns)])
        src_l.append(np.full(len(labels), i))
        lab_l.append(labels)
        dst_l.append(keys)
        uniq = np.sort(keys)  # np.unique's hashing is slower on these small arrays (numpy 2.4)
        for k in uniq[np.r_[True, uniq[1:] != uniq[:-1]]].tolist() if len(uniq) else ():
            if k not in ids:
                ids[k] = len(order)
                order.append(k)
        i += 1
    known = np.array(order, np.int64)
    sort = np.argsort(known)
    members = [member(k) for k in order]
    finals = np.array([marked.final(p) != zero and word.ends(c, fb, n) for p, c, fb, n in members])
    src, lab, keys = (np.concatenate(x).astype(np.int64) for x in (src_l, lab_l, dst_l))
    dst = sort[np.searchsorted(known, keys, sorter=sort)]
    f = fst_from_arrays(len(order), 0, finals, src, lab + 1, lab + 1, dst)
    f.connect()
    if f.num_states() == 0:
        raise EmptyLanguageError("no canonical token sequence spells a string of this language",
                                 "every matching string tokenizes through other paths; check the regex")
    f.rmepsilon()
    f = pynini.determinize(f)
    f.minimize()
    arcs = sum(f.num_arcs(s) for s in f.states())
    if arcs > max_arcs:
        raise LimitError("the canonical automaton", "max_arcs", max_arcs, arcs, remedy="factorized")
    return f


class MarkedFactorized(Steps):
    """S_M and the per-word A_BPE combined at lookup time; a state is a set of members (Python API).

    ``arcs(p)`` gives S_M's sorted token ids (the boundary, one past the last id, comes last) and
    next states. Only tokens after which a canonical completion exists are offered: the
    co-reachability table (``liveness``) is computed here, or read by ``live(word, arcs)``."""

    def __init__(self, arcs: Callable[[int], tuple[np.ndarray, np.ndarray]], finals: np.ndarray, start: int,
                 imp: ImplicitBpe, live=None, limit: int | None = None):
        self._arcs, self.finals, self.start, self.imp = arcs, finals, start, imp
        self.vocab_size = imp.vocab_size
        self.word = Word(imp)
        self.bound = imp.vocab_size
        self._cache: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
        self.live = (live(self.word, self.arcs) if live is not None
                     else compute(self.word, self.arcs, finals, start, limit=limit))

    def arcs(self, p: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Token ids, next states, and the state after a boundary (-1: none) of S_M's state p."""
        got = self._cache.get(p)
        if got is None:
            labels, nexts = self._arcs(p)
            after = -1
            if len(labels) and labels[-1] == self.bound:
                after, labels, nexts = int(nexts[-1]), labels[:-1], nexts[:-1]
            got = self._cache[p] = (labels, nexts, after)
        return got

    def _closure(self, members: set[Member]) -> frozenset[Member]:
        out = set(members)
        for p, c, fb, node in members:
            after = self.arcs(p)[2]
            if after >= 0 and self.word.ends(c, fb, node):
                out.add((after, START, 0, 0))
        return frozenset(out)

    def initial(self) -> frozenset[Member]:
        return self._closure({(self.start, START, 0, 0)})

    def is_state(self, state: Any) -> bool:
        return type(state) is frozenset and all(is_member(m, len(self.finals)) for m in state)

    def mask(self, state: frozenset[Member]) -> np.ndarray:
        return unpack(self.bitmask(state), self.imp.vocab_size)

    def bitmask(self, state: frozenset[Member], out: np.ndarray | None = None) -> np.ndarray:
        """The union of the members' masks as packed int32 words: written into ``out`` (int32,
        one word per 32 token ids) if given, else a new or shared read-only array."""
        if type(state) is not frozenset:
            raise ForeignStateError(state, type(self).__name__)
        try:
            return as_int32(self.live.words(state, as_words(out)))
        except Exception:
            check_state(self, state)
            raise

    def advance(self, state: frozenset[Member], token: int) -> frozenset[Member]:
        if type(token) is not int or not 0 <= token < self.vocab_size:
            token = token_id(token, self.vocab_size)
        if type(state) is not frozenset:
            raise ForeignStateError(state, type(self).__name__)
        nxt: set[Member] = set()
        live = False
        try:
            for p, c, fb, node in state:
                labels, nexts, _ = self.arcs(p)
                i = int(np.searchsorted(labels, token))
                if i < len(labels) and labels[i] == token and self.word.allows(c, fb, token):
                    nxt.add((int(nexts[i]), *self.word.after_one(c, fb, node, token)))
                    live = live or bool(self.live.live_next(p, c, fb, node)[i])
        except Exception:
            check_state(self, state)
            raise
        if not live:
            raise DisallowedTokenError(token, state)
        return self._closure(nxt)

    def is_final(self, state: frozenset[Member]) -> bool:
        if type(state) is not frozenset:
            raise ForeignStateError(state, type(self).__name__)
        try:
            return any(bool(self.finals[p]) and self.word.ends(c, fb, n) for p, c, fb, n in state)
        except Exception:
            check_state(self, state)
            raise


def factorize(marked: pynini.Fst, imp: ImplicitBpe, limit: int | None = None):
    """Wrap S_M and A_BPE; their co-reachability is computed, nothing else is expanded.
    ``limit`` (``max_tokens``): within that many tokens (``counted.CountedFactorized``)."""
    zero = pynini.Weight.zero(marked.weight_type())
    finals = np.array([marked.final(s) != zero for s in range(marked.num_states())])
    return counted(MarkedFactorized(sorted_arcs_reader(marked), finals, marked.start(), imp, limit=limit), limit)
