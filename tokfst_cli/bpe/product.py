"""Stage C for BPE: canonical filtering with the implicit A_BPE (seed 000 Eq. 5, Sec. 6.5; seed 001 Sec. 3.3).

Materialized: the product of the agnostic token acceptor S = MIN(PROJ(A o T)) (stage S) with the implicit
A_BPE, whose state is (class of the last token, byte-fallback DFA state); only reachable pairs
are built, each state's allowed tokens are one numpy mask, and OpenFst minimizes the result.

Factorized: S and the implicit A_BPE side by side, combined at lookup time:
mask(p, s) = allowed(p) minus BANNED(s), next((p, s), v) = (delta_S(p, v), step(s, v)).
"""

from __future__ import annotations


import numpy as np
import pynini

from ..artifacts import fst_from_arrays
from ..errors import DisallowedTokenError, EmptyLanguageError, InputError, LimitError
from .explicit import START, ignore_merges_correction, successors
from .implicit import ImplicitBpe

State = tuple[int, int, int, int]  # (state of S, class of last token | START | WHOLE, fallback state, trie node)
WHOLE = -2  # after a token that ignore_merges allows only as the whole word


class Stepper:
    """The implicit A_BPE as a deterministic automaton over token ids, with cached masks."""

    def __init__(self, imp: ImplicitBpe):
        self.imp = imp
        self.classes = imp.classes()
        ids, first = np.unique(self.classes, return_index=True)
        self.reps = dict(zip(ids.tolist(), first.tolist()))
        self._masks: dict[tuple[int, int], np.ndarray] = {}
        self._next_fb: dict[int, np.ndarray] = {}

    def next_fb(self, fb: int) -> np.ndarray:
        """Fallback-DFA state after each token, from state fb (0 for ordinary tokens)."""
        arr = self._next_fb.get(fb)
        if arr is None:
            b = self.imp.fb_byte
            arr = self._next_fb[fb] = np.where(b >= 0, self.imp.fb_delta[fb, np.clip(b, 0, 255)], 0)
        return arr

    def mask(self, cls: int, fb: int) -> np.ndarray:
        key = (cls, fb)
        m = self._masks.get(key)
        if m is None:
            m = self._masks[key] = successors(self.imp, cls, self.reps.get(cls, -1), fb)
        return m

    def final(self, cls: int, fb: int) -> bool:
        return fb == 0 and bool(self.imp.fb_final[0]) and (cls == START or bool(self.imp.may_end[self.reps[cls]]))


def stepper(imp: ImplicitBpe) -> Stepper:
    """One Stepper per loaded artifact (its class masks are shared by every promotion)."""
    if "stepper" not in imp.derived:
        imp.derived["stepper"] = Stepper(imp)
    return imp.derived["stepper"]


def labels_mask(cache: dict, p: int, labels, size: int) -> np.ndarray:
    """Bool mask of the token ids ``labels()`` of state p, cached in ``cache``."""
    a = cache.get(p)
    if a is None:
        a = cache[p] = np.zeros(size, bool)
        a[labels()] = True
    return a


def sorted_arcs(fst: pynini.Fst, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Token ids (sorted) and next states of state p of a token acceptor."""
    arr = np.array([(a.ilabel - 1, a.nextstate) for a in fst.arcs(p)], np.int64).reshape(-1, 2)
    order = np.argsort(arr[:, 0], kind="stable")
    return arr[order, 0], arr[order, 1]


def materialize(agnostic: pynini.Fst, imp: ImplicitBpe, max_arcs: int = 2_000_000) -> pynini.Fst:
    """MIN(S x A_BPE) over the reachable part; LimitError past ``max_arcs``.

    Two phases: a vectorized exploration that numbers the reachable (p, class, fallback) states
    and counts arcs (stopping early past ``max_arcs``, before any arc is built), then the Fst.
    """
    step = stepper(imp)
    arcs = {p: sorted_arcs(agnostic, p) for p in agnostic.states()}
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
        labels, targets = arcs[p]
        if len(labels):
            keep = step.mask(c - 1, fb)[labels]
            labels, targets = labels[keep], targets[keep]
        total += len(labels)
        if total > max_arcs:
            raise LimitError("the canonical automaton", "max_arcs", max_arcs, remedy="factorized")
        keys = (targets * n_cls + step.classes[labels] + 1) * n_fb + step.next_fb(fb)[labels]
        for u in np.unique(keys).tolist():
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


class Factorized:
    """The agnostic automaton and the implicit A_BPE, combined at lookup time (Python API).

    Per-state arrays of S are read on first use, so wrapping costs nothing up front.
    """

    def __init__(self, arcs, finals: np.ndarray, start: int, imp: ImplicitBpe):
        self._arcs = arcs  # state -> (sorted token ids, next states), or a function computing it
        self.finals = finals
        self.start = start
        if imp.alone.any() and "replaced" not in imp.derived:
            raise InputError("this artifact's tokenizer uses ignore_merges", "load it with the tokenizer (model=...)")
        # ignore_merges: the merge tokenizations replaced by one token, as a trie from the word start
        self._children: dict[tuple[int, int], int] = {}
        self._complete: set[int] = set()
        for seq in imp.derived.get("replaced", {}).values():
            node = 0
            for t in seq:
                node = self._children.setdefault((node, t), len(self._children) + 1)
            if len(seq) > 1:
                self._complete.add(node)
        self.imp = imp
        self.step = stepper(imp)
        self._allowed: dict[int, np.ndarray] = {}
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def arcs(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        got = self._cache.get(p)
        if got is None:
            got = self._cache[p] = self._arcs(p)
        return got

    @property
    def masks(self) -> list[np.ndarray]:
        return [self.arcs(p)[0] for p in range(len(self.finals))]

    @property
    def nexts(self) -> list[np.ndarray]:
        return [self.arcs(p)[1] for p in range(len(self.finals))]

    def _allowed_p(self, p: int) -> np.ndarray:
        return labels_mask(self._allowed, p, lambda: self.arcs(p)[0], self.imp.vocab_size)

    def initial(self) -> State:
        return (self.start, START, 0, 0)

    def mask(self, state: State) -> np.ndarray:
        """Bool mask over token ids: the tokens allowed next."""
        p, cls, fb, _ = state
        if cls == WHOLE:
            return np.zeros(self.imp.vocab_size, bool)
        m = self._allowed_p(p) & self.step.mask(cls, fb)
        if cls == START and self.imp.alone.any():
            m |= self._allowed_p(p) & self.imp.alone
        return m

    def advance(self, state: State, token: int) -> State:
        p, cls, fb, node = state
        labels, nexts = self.arcs(p)
        i = np.searchsorted(labels, token)
        if i >= len(labels) or labels[i] != token or not self.mask(state)[token]:
            raise DisallowedTokenError(token, state)
        if self.imp.alone[token]:
            return (int(nexts[i]), WHOLE, 0, -1)
        node = self._children.get((node, token), -1) if node >= 0 else -1
        return (int(nexts[i]), int(self.step.classes[token]), int(self.step.next_fb(fb)[token]), node)

    def is_final(self, state: State) -> bool:
        p, cls, fb, node = state
        if cls == WHOLE:
            return bool(self.finals[p])
        return bool(self.finals[p]) and self.step.final(cls, fb) and node not in self._complete


def factorize(agnostic: pynini.Fst, imp: ImplicitBpe) -> Factorized:
    """Wrap S and the implicit A_BPE; nothing is expanded until it is looked up."""
    zero = pynini.Weight.zero(agnostic.weight_type())
    finals = np.array([agnostic.final(s) != zero for s in range(agnostic.num_states())])
    return Factorized(lambda p: sorted_arcs(agnostic, p), finals, agnostic.start(), imp)
