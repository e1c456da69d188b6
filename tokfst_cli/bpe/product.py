"""Canonical promotion with the implicit A_BPE (seed 000 Eq. 5, Sec. 6.5; seed 001 Sec. 3.3).

Materialized: the product of the agnostic token acceptor P = MIN(PROJ(A o T)) with the implicit
A_BPE, whose state is (class of the last token, byte-fallback DFA state); only reachable pairs
are built, each state's allowed tokens are one numpy mask, and OpenFst minimizes the result.

Factorized: P and the implicit A_BPE side by side, combined at lookup time:
mask(p, s) = allowed(p) minus BANNED(s), next((p, s), v) = (delta_P(p, v), step(s, v)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pynini

from ..errors import EmptyLanguageError, InputError, LimitError
from .explicit import START, successors
from .implicit import ImplicitBpe

State = tuple[int, int, int]  # (state of P, class of last token or START, fallback DFA state)


def _check_supported(imp: ImplicitBpe) -> None:
    if imp.alone.any() or "texts" in imp.derived:
        raise InputError("canonical promotion does not model ignore_merges yet",
                         "use tokfst canonical-check for such tokenizers")


class Stepper:
    """The implicit A_BPE as a deterministic automaton over token ids, with cached masks."""

    def __init__(self, imp: ImplicitBpe):
        _check_supported(imp)
        self.imp = imp
        self.classes = imp.classes()
        self.reps: dict[int, int] = {}
        for t in np.flatnonzero(self.classes >= 0):
            self.reps.setdefault(int(self.classes[t]), int(t))
        self._masks: dict[tuple[int, int], np.ndarray] = {}
        fb = imp.fb_byte
        self.next_fb = {f: np.where(fb >= 0, imp.fb_delta[f, np.clip(fb, 0, 255)], 0)
                        for f in range(len(imp.fb_final))}

    def mask(self, cls: int, fb: int) -> np.ndarray:
        key = (cls, fb)
        m = self._masks.get(key)
        if m is None:
            m = self._masks[key] = successors(self.imp, cls, self.reps.get(cls, -1), fb)
        return m

    def final(self, cls: int, fb: int) -> bool:
        return fb == 0 and bool(self.imp.fb_final[0]) and (cls == START or bool(self.imp.may_end[self.reps[cls]]))


def _arc_arrays(fst: pynini.Fst) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for s in fst.states():
        pairs = [(a.ilabel - 1, a.nextstate) for a in fst.arcs(s)]
        arr = np.array(pairs, np.int64).reshape(-1, 2)
        out[s] = (arr[:, 0], arr[:, 1])
    return out


def materialize(agnostic: pynini.Fst, imp: ImplicitBpe, max_arcs: int = 2_000_000) -> pynini.Fst:
    """MIN(P x A_BPE) over the reachable part; LimitError past ``max_arcs``."""
    step = Stepper(imp)
    arcs = _arc_arrays(agnostic)
    zero = pynini.Weight.zero(agnostic.weight_type())
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    start: State = (agnostic.start(), START, 0)
    ids = {start: f.add_state()}
    f.set_start(ids[start])
    queue = [start]
    total = 0
    while queue:
        p, cls, fb = queue.pop()
        src = ids[(p, cls, fb)]
        if agnostic.final(p) != zero and step.final(cls, fb):
            f.set_final(src)
        labels, targets = arcs[p]
        if not len(labels):
            continue
        keep = step.mask(cls, fb)[labels]
        labels, targets = labels[keep], targets[keep]
        total += len(labels)
        if total > max_arcs:
            raise LimitError(f"the canonical automaton needs more than {max_arcs} arcs",
                             "use --format index (factorized) or raise --max-arcs")
        next_cls = step.classes[labels]
        next_fb = step.next_fb[fb][labels]
        for v, q, c, g in zip(labels.tolist(), targets.tolist(), next_cls.tolist(), next_fb.tolist()):
            key = (q, c, g)
            dst = ids.get(key)
            if dst is None:
                dst = ids[key] = f.add_state()
                queue.append(key)
            f.add_arc(src, pynini.Arc(v + 1, v + 1, one, dst))
    f.connect()
    if f.num_states() == 0:
        raise EmptyLanguageError("no canonical token sequence spells a string of this language",
                                 "every matching string tokenizes through other paths; check the regex")
    f.minimize()
    f.set_input_symbols(agnostic.input_symbols()).set_output_symbols(agnostic.output_symbols())
    return f


@dataclass
class Factorized:
    """The agnostic automaton and the implicit A_BPE, combined at lookup time (Python API)."""

    masks: list[np.ndarray]  # per state of P: allowed token ids (sorted)
    nexts: list[np.ndarray]  # per state of P: next state per allowed token
    finals: np.ndarray  # bool per state of P
    start: int
    imp: ImplicitBpe

    def __post_init__(self):
        self.step = Stepper(self.imp)
        n = self.imp.vocab_size
        self._allowed = []
        for m in self.masks:
            a = np.zeros(n, bool)
            a[m] = True
            self._allowed.append(a)

    def initial(self) -> State:
        return (self.start, START, 0)

    def mask(self, state: State) -> np.ndarray:
        """Bool mask over token ids: the tokens allowed next."""
        p, cls, fb = state
        return self._allowed[p] & self.step.mask(cls, fb)

    def advance(self, state: State, token: int) -> State:
        p, cls, fb = state
        i = np.searchsorted(self.masks[p], token)
        if i >= len(self.masks[p]) or self.masks[p][i] != token or not self.step.mask(cls, fb)[token]:
            raise ValueError(f"token {token} is not allowed in state {state}")
        return (int(self.nexts[p][i]), int(self.step.classes[token]), int(self.step.next_fb[fb][token]))

    def is_final(self, state: State) -> bool:
        p, cls, fb = state
        return bool(self.finals[p]) and self.step.final(cls, fb)


def factorize(agnostic: pynini.Fst, imp: ImplicitBpe) -> Factorized:
    zero = pynini.Weight.zero(agnostic.weight_type())
    arcs = _arc_arrays(agnostic)
    n = agnostic.num_states()
    masks, nexts = [], []
    for s in range(n):
        labels, targets = arcs[s]
        order = np.argsort(labels)
        masks.append(labels[order])
        nexts.append(targets[order])
    finals = np.array([agnostic.final(s) != zero for s in range(n)])
    return Factorized(masks, nexts, finals, agnostic.start(), imp)
