"""A DFA over code point classes as a DFA over UTF-8 bytes (Pitfalls 2025 Sec. 3, App. A), in bulk.

The byte automaton's states are the class DFA's states (at a character boundary) and, inside a
character, pairs (state, UTF-8 prefix) merged when they lead to the same states on every
continuation: prefixes are interned bottom-up (the 64 code points under a last-but-one byte, then
the 64 such nodes under the byte before), per state with numpy. The arcs are written at once
(:func:`tokfst_cli.automata.arrays.fst_from_arrays`); labels are byte + 1.
"""

from __future__ import annotations

import numpy as np
import pynini

from tokfst_cli.automata.arrays import fst_from_arrays

# (lead bytes, second-byte range) of the 3- and 4-byte forms (no overlongs, no surrogates)
_SECOND = {0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F), 0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of each row among the distinct rows, the distinct rows)."""
    rows = np.ascontiguousarray(rows)
    view = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    _, first, inverse = np.unique(view, return_index=True, return_inverse=True)
    return inverse.ravel(), rows[first]


class _Builder:
    def __init__(self, num_states: int):
        self.num_states = num_states
        self.src: list[np.ndarray] = []
        self.label: list[np.ndarray] = []
        self.dst: list[np.ndarray] = []

    def arcs(self, src: np.ndarray, label: np.ndarray, dst: np.ndarray) -> None:
        self.src.append(np.asarray(src, np.int64))
        self.label.append(np.asarray(label, np.int64))
        self.dst.append(np.asarray(dst, np.int64))

    def node(self, targets: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """States for a prefix whose continuations ``labels`` lead, from each class state, to
        ``targets[q, j]`` (-1: none): one state per distinct row, -1 where nothing continues."""
        which, rows = _unique_rows(targets)
        live = (rows >= 0).any(1)
        base = self.num_states
        self.num_states += int(live.sum())
        ids = np.where(live, base + np.cumsum(live) - 1, -1)
        s, j = np.nonzero(rows[live] >= 0)
        self.arcs(base + s, labels[j], rows[live][s, j])
        return ids[which]

    def fst(self, start: int, finals: np.ndarray) -> pynini.Fst:
        label = np.concatenate(self.label) + 1
        mask = np.zeros(self.num_states, bool)
        mask[: len(finals)] = finals
        return fst_from_arrays(self.num_states, start, mask, np.concatenate(self.src), label, label,
                               np.concatenate(self.dst))


def to_bytes(delta: np.ndarray, cls_of: np.ndarray, start: int = 0, finals: np.ndarray | None = None) -> pynini.Fst:
    """The byte DFA of a DFA over classes: ``delta[q, class]`` (-1: none), ``cls_of[cp]`` (-1: none)."""
    n, k = delta.shape
    padded = np.concatenate([delta, np.full((n, 1), -1, delta.dtype)], 1)  # class -1 reads column k
    cls = np.where(cls_of < 0, k, cls_of)
    b = _Builder(n)
    blocks = cls.reshape(-1, 64)  # block i: code points 64i .. 64i+63, one last-but-one byte
    block_kind, kinds = _unique_rows(blocks)
    cont = np.arange(0x80, 0xC0)
    last = np.empty((n, len(kinds)), np.int64)  # state after the last-but-one byte, per block kind
    for v, vec in enumerate(kinds):
        cols, inverse = np.unique(vec, return_inverse=True)
        last[:, v] = b.node(padded[:, cols][:, inverse.ravel()], cont)

    memo: dict[tuple, tuple[int, np.ndarray]] = {}  # a prefix's children (as keys) -> (key, states)

    def node(children: list[tuple[int, np.ndarray]], labels: np.ndarray) -> tuple[int, np.ndarray]:
        key = tuple(c for c, _ in children)
        if key not in memo:
            memo[key] = (len(memo) + len(kinds), b.node(np.stack([ids for _, ids in children], 1), labels))
        return memo[key]

    def block(i: int) -> tuple[int, np.ndarray]:
        return int(block_kind[i]), last[:, block_kind[i]]

    for lead in range(0x80):
        t = padded[:, cls[lead]]
        q = np.flatnonzero(t >= 0)
        b.arcs(q, np.full(len(q), lead), t[q])
    for lead in range(0xC2, 0xF5):
        if lead < 0xE0:
            t = block(lead & 0x1F)[1]
        else:
            lo, hi = _SECOND.get(lead, (0x80, 0xBF))
            seconds = np.arange(lo, hi + 1)
            if lead < 0xF0:
                kids = [block(((lead & 0xF) << 6) | (s & 0x3F)) for s in seconds]
            else:
                kids = [node([block(((lead & 7) << 12) | ((s & 0x3F) << 6) | (c & 0x3F)) for c in cont], cont)
                        for s in seconds]
            t = node(kids, seconds)[1]
        q = np.flatnonzero(t >= 0)
        b.arcs(q, np.full(len(q), lead), t[q])
    return b.fst(start, np.ones(n, bool) if finals is None else finals)
