"""The unit graph of the factorized canonical BPE product, as flat arrays (``liveness``).

The units (``liveness``' module docstring) that a decoder can reach from the start state,
explored with the decoder's own token filters: a generic unit (p, fb) offers the tokens of
``follow(fb)`` (its class's BANNED row is cut per member), a special unit (a word start or a
node of the ignore_merges trie) those of ``allowed(cls, fb)``. Every member a decoder reaches
is a unit found here, and every successor of a unit is one, so the fixpoint over these units
decides every mask exactly.

Each unit's tokens are stored once with the table *cell* of the member each leads to: generic
row * width + column (the token's class, or WHOLE's column), one cell per special unit after
the generic rows, and a last cell that is never live (a token A_BPE never allows). A unit is
then evaluated by reading cells (``val[cell]``), not by recomputing successors per evaluation.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tokfst_cli.automata.arrays import unique
from tokfst_cli.bpe.explicit import START
from tokfst_cli.bpe.word import DEAD, WHOLE, Word


def distinct(keys: np.ndarray) -> np.ndarray:
    """``np.unique`` of nonnegative keys: a Python set for a few, else by marking a bool table
    where the keys' range is at most a few times their number (no sort, no hash), else by sorting."""
    if len(keys) <= 32:  # a few: a set is cheaper than either
        return np.array(sorted(set(keys.tolist())), keys.dtype)
    top = int(keys.max()) + 1
    if top > 4 * len(keys) + 1024:
        return unique(keys)
    seen = np.zeros(top, bool)
    seen[keys] = True
    return np.flatnonzero(seen)


def special_unit(key: int, n_fb: int, word: Word) -> tuple[int, int, int, int]:
    """(p, fb, node, class) of a special unit's key ((p * n_fb + fb) * nodes + node): the trie's
    root is a word start (START), another node has the class of the token that leads to it."""
    (p, fb), node = divmod(key // word.nodes, n_fb), key % word.nodes
    return p, fb, node, START if node == 0 else int(word.classes[word.last[node]])


class UnitGraph(NamedTuple):
    units: list[tuple[str, int]]  # (kind, key), discovery order: "g" p * n_fb + fb; "s" (p * n_fb + fb) * nodes + node
    row: np.ndarray  # per unit: its generic row (discovery order among generic units), -1 for a special unit
    slot: np.ndarray  # per unit: its cell when special, -1 for a generic unit
    state: np.ndarray  # per unit: p
    fb: np.ndarray  # per unit: its fallback state
    ends: np.ndarray  # per special unit: may the word end there (``Word.ends``)
    ptr: np.ndarray  # per unit u: its tokens are ptr[u]:ptr[u + 1] of label and cell
    label: np.ndarray  # token ids
    cell: np.ndarray  # the cell of the member after each token
    boundary: np.ndarray  # per unit: the cell of the word start after its pre-token boundary, -1 if none
    after: list[int]  # per unit: that word start's unit, -1 if none
    succ: list[list[int]]  # per unit: the units its tokens and its boundary lead to
    width: int  # columns of a generic row: the classes, then WHOLE
    generic: int  # generic rows

    @property
    def cells(self) -> int:
        """Cells: the generic rows, one per special unit, the never-live one."""
        return self.generic * self.width + int((self.row < 0).sum()) + 1

    def preds(self) -> list[list[int]]:
        """Per unit, the units with a token or a boundary into it."""
        out: list[list[int]] = [[] for _ in self.units]
        for u, vs in enumerate(self.succ):
            for v in vs:
                out[v].append(u)
        return out

    def relevant(self) -> tuple[np.ndarray, np.ndarray]:
        """(classes, ptr): per generic row r, classes[ptr[r]:ptr[r + 1]] are the classes (sorted) of
        the tokens into it: the columns of the row a member can have, the only ones decided."""
        gen = self.cell < self.generic * self.width
        cells = distinct(self.cell[gen])
        r, col = np.divmod(cells, self.width)
        keep = col < self.width - 1  # WHOLE's column is decided apart
        r, col = r[keep], col[keep]
        return col, np.searchsorted(r, np.arange(self.generic + 1))


def explore(word: Word, arcs, start: int) -> UnitGraph:
    """The units reachable from the word start at ``start`` (``arcs``: p -> (token ids, next
    states, state after a boundary or -1))."""
    imp = word.imp
    n_fb, nodes = len(imp.fb_final), word.nodes
    n_cls = int(word.classes.max()) + 1 if (word.classes >= 0).any() else 0
    width = n_cls + 1
    ids: dict[tuple[str, int], int] = {}
    units: list[tuple[str, int]] = []
    rows: list[int] = []  # per unit: generic row, or -(special number) - 2 while the rows are being counted
    count = [0, 0]

    def unit(kind: str, key: int) -> int:
        u = ids.get((kind, key))
        if u is None:
            u = ids[(kind, key)] = len(units)
            units.append((kind, key))
            rows.append(count[0] if kind == "g" else -count[1] - 2)
            count[kind != "g"] += 1
        return u

    unit("s", start * n_fb * nodes)
    labels_out: list[np.ndarray] = []
    cells_out: list[np.ndarray] = []
    state, fbs, ends, boundary, after_units = [], [], [], [], []
    succ: list[list[int]] = []
    i = 0
    while i < len(units):
        kind, key = units[i]
        if kind == "g":
            (p, fb), node, cls = divmod(key, n_fb), DEAD, 0
            allowed = word.step.follow(fb)  # allowed, may follow some class, the fallback-DFA condition
        else:
            p, fb, node, cls = special_unit(key, n_fb, word)
            allowed = word.allowed(cls, fb)
        labels, nexts, after = arcs(p)
        keep = allowed[labels]
        labels, nexts = labels[keep], nexts[keep]
        if kind == "g":  # ``Word.after`` inside a word: the token's class and fallback state, no trie node
            cs, ns = word.classes[labels], None
            fs = word.step.next_fb(fb)[labels] if n_fb > 1 else 0
            col = cs
        else:
            cs, fs, ns = word.after(cls, fb, node, labels)
            col = np.where(cs == WHOLE, n_cls, cs)
        gen = (cs != -1) if ns is None else (ns == DEAD) & (cs != -1)
        each = nexts * n_fb + fs if n_fb > 1 else nexts
        keys = distinct(each[gen])
        us = [unit("g", k) for k in keys.tolist()]
        got = np.array([rows[v] for v in us], np.int64)
        cell = got[np.minimum(np.searchsorted(keys, each), len(keys) - 1)] * width + col \
            if len(keys) else np.full(len(labels), -1, np.int64)
        cell[~gen] = -1  # -1: never live
        for j in (np.flatnonzero(ns != DEAD) if ns is not None else ()):
            us.append(unit("s", (int(nexts[j]) * n_fb + int(fs[j])) * nodes + int(ns[j])))
            cell[j] = rows[us[-1]]
        labels_out.append(labels)
        cells_out.append(cell)
        state.append(p)
        fbs.append(fb)
        ends.append(kind == "s" and word.ends(cls, fb, node))
        after_units.append(unit("s", after * n_fb * nodes) if after >= 0 else -1)
        boundary.append(rows[after_units[-1]] if after >= 0 else -1)
        succ.append(sorted(set(us + ([after_units[-1]] if after >= 0 else []))))
        i += 1
    generic = count[0]
    row = np.array(rows, np.int64)

    def final_cells(c: np.ndarray) -> np.ndarray:
        """Cells as numbered while exploring (special: -(number) - 2, never: -1) to their places."""
        c = c.copy()
        neg = np.flatnonzero(c < 0)
        c[neg] = np.where(c[neg] == -1, generic * width + count[1], generic * width - c[neg] - 2)
        return c

    ptr = np.r_[0, np.cumsum([len(x) for x in labels_out])].astype(np.int64)
    label = np.concatenate(labels_out) if labels_out else np.zeros(0, np.int64)
    cell = final_cells(np.concatenate(cells_out) if cells_out else np.zeros(0, np.int64))
    slot = np.where(row < 0, final_cells(np.minimum(row, -2)), -1)
    bnd = np.array(boundary, np.int64)
    return UnitGraph(units, np.where(row >= 0, row, -1), slot, np.array(state, np.int64), np.array(fbs, np.int64),
                     np.array(ends, bool), ptr, label, cell,
                     np.where(bnd == -1, -1, final_cells(np.minimum(bnd, -2))), after_units, succ, width, generic)
