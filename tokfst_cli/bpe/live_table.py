"""Stage C for BPE: the co-reachability table of the factorized product (Pitfalls 2025 App. B): which
members still reach a final state, per token class, and how many tokens away (max_tokens)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tokfst_cli.automata import bitsets
from tokfst_cli.bpe.explicit import START
from tokfst_cli.bpe.units import special_unit
from tokfst_cli.bpe.word import DEAD, WHOLE, Word
from tokfst_cli.errors import InternalError, UsageError

# p -> (token ids, next states, state after a boundary or -1)
Arcs = Callable[[int], tuple[np.ndarray, np.ndarray, int]]


NO_PATH = 0xFFFFFFFF  # a stored distance: no final state within the limit


SPARSE = 1024  # a unit with at most this many live tokens keeps ids (merged with a class's row per step)


def pair_rows(pair_keys: np.ndarray, n_fb: int, p_next: np.ndarray, fb_next: np.ndarray) -> np.ndarray:
    """Table row of each generic unit (p_next[i], fb_next[i]) among the sorted ``pair_keys``; -1 if absent."""
    keys = p_next * n_fb + fb_next
    i = np.clip(np.searchsorted(pair_keys, keys), 0, max(len(pair_keys) - 1, 0))
    found = (pair_keys[i] == keys) if len(pair_keys) else np.zeros(len(keys), bool)
    return np.where(found, i, -1)


def successor_values(table: np.ndarray, fill, pair_keys: np.ndarray, n_fb: int, nexts: np.ndarray, cs: np.ndarray,
                     fs: np.ndarray, ns: np.ndarray, special: Callable[[int, int, int], Any]) -> np.ndarray:
    """The table's entry for the member after each arc (``fill`` where it has none): liveness
    bits, or the fewest tokens to a final state (``max_tokens``)."""
    col = np.where(cs == WHOLE, table.shape[1] - 1, cs)
    pid = pair_rows(pair_keys, n_fb, nexts, fs)
    ok = (pid >= 0) & (cs != -1)  # -1: a token A_BPE never allows
    out = np.full(len(nexts), fill, table.dtype)
    out[ok] = table[pid[ok], col[ok]]
    for j in np.flatnonzero(ns != DEAD):
        out[j] = special(int(nexts[j]), int(fs[j]), int(ns[j]))
    return out


class Liveness:
    """Live units of one factorized product; ``live_next`` filters masks (see the module docstring)."""

    def __init__(self, word: Word, arcs: Arcs, pair_keys: np.ndarray, live: np.ndarray,
                 special_keys: np.ndarray, special_live: np.ndarray, dist: np.ndarray | None = None,
                 special_dist: np.ndarray | None = None):
        """``dist``/``special_dist`` (``max_tokens``): the fewest tokens from each member to a
        final state, unsigned, its dtype's maximum where there is none within the limit; ``live``
        is then where they are finite."""
        self.word, self.imp, self._arcs = word, word.imp, arcs
        self.dist, self.special_dist = dist, special_dist
        self.far = np.iinfo(dist.dtype).max if dist is not None else None
        self._far: dict[tuple, np.ndarray] = {}
        self._top: dict[tuple, int] = {}
        self.n_fb = len(self.imp.fb_final)
        self.n_cls = int(word.classes.max()) + 1 if (word.classes >= 0).any() else 0
        self.pair_keys, self.live = pair_keys, live  # live: (pairs, n_cls + 1) bool; column n_cls = WHOLE
        self.special_keys, self.special_live = special_keys, special_live
        self.nwords = bitsets.words_for(self.imp.vocab_size)
        self._next: dict[tuple, np.ndarray] = {}
        self._units: dict[tuple, tuple] = {}
        self._specials: dict[tuple, tuple] = {}  # (ids, None) or (None, packed words)
        self._row_bounds: tuple[list[int], list[int]] | None = None
        self.warmed = False  # ``warm`` has run (at load; else before the first mask)

    # ---- lookups ------------------------------------------------------------------------
    def _special_at(self, p: int, fb: int, node: int) -> int:
        """Row of special member (p, fb, node) in the special arrays, -1 if it has none."""
        key = (p * self.n_fb + fb) * self.word.nodes + node
        i = int(np.searchsorted(self.special_keys, key))
        return i if i < len(self.special_keys) and self.special_keys[i] == key else -1

    def special(self, p: int, fb: int, node: int) -> bool:
        i = self._special_at(p, fb, node)
        return i >= 0 and bool(self.special_live[i])

    def _per_arc(self, cache: dict, table: np.ndarray, fill, special, p: int, cls: int, fb: int,
                 node: int) -> np.ndarray:
        """Over p's arcs, ``table``'s entry for the member after each token (cached per member;
        one per generic unit, whose successors do not depend on the class)."""
        key = (p, fb) if cls != START and node == DEAD else (p, cls, fb, node)
        got = cache.get(key)
        if got is None:
            labels, nexts, _ = self._arcs(p)
            cs, fs, ns = self.word.after(cls, fb, node, labels)
            got = cache[key] = successor_values(table, fill, self.pair_keys, self.n_fb, nexts, cs, fs, ns, special)
        return got

    def live_next(self, p: int, cls: int, fb: int, node: int) -> np.ndarray:
        """Bool over p's arcs (``arcs(p)[0]``): is the member after each token live?"""
        return self._per_arc(self._next, self.live, False, self.special, p, cls, fb, node)

    def live_ids(self, p: int, cls: int, fb: int, node: int, budget: int | None = None) -> np.ndarray:
        """Token ids (sorted) of p's arcs whose successor member is live (with ``budget``: has a
        final state within that many tokens)."""
        keep = self.live_next(p, cls, fb, node) if budget is None else self.far_next(p, cls, fb, node) <= budget
        return self._arcs(p)[0][keep]

    # ---- max_tokens: the fewest tokens to a final state (compute(limit=N)) ----------------
    def special_far(self, p: int, fb: int, node: int) -> int:
        i = self._special_at(p, fb, node)
        return int(self.special_dist[i]) if i >= 0 else int(self.far)

    def far_next(self, p: int, cls: int, fb: int, node: int) -> np.ndarray:
        """Over p's arcs: the fewest tokens from the member after each token to a final state."""
        return self._per_arc(self._far, self.dist, self.far, self.special_far, p, cls, fb, node)

    def top(self, p: int, cls: int, fb: int, node: int) -> int:
        """The most tokens a live successor of the member needs (-1: none): a budget at least
        this binds nothing."""
        key = (p, fb) if cls != START and node == DEAD else (p, cls, fb, node)
        got = self._top.get(key)
        if got is None:
            far = self.far_next(p, cls, fb, node)
            far = far[far != self.far]
            got = self._top[key] = int(far.max()) if len(far) else -1
        return got

    def warm(self, budget: int = 1 << 26) -> None:
        """Make every unit's packed live tokens now (at load, not at a decoding step), while they
        fit in ``budget`` bytes; past it they are made on first use."""
        self.warmed = True
        self.word.allowed(START, 0)  # the class-free masks every first step needs
        self.word.step.follow(0)
        rows = self.imp._rows()  # what a step reads, as attributes: no lookups per step
        self._ra, self._rb = self._class_rows()
        self._lo, self._hi, self._lorder, self._k = rows.lo, rows.hi, self.imp.lorder, bitsets.kernels()
        used = 0
        for key in self.pair_keys.tolist():
            ids, lpos, words = self._unit(*divmod(key, self.n_fb))
            used += ids.nbytes + lpos.nbytes if words is None else words.nbytes
            if used > budget:
                return
        for key in self.special_keys.tolist():
            p, fb, node, cls = special_unit(key, self.n_fb, self.word)
            ids, words = self._special(p, cls, fb, node)
            used += ids.nbytes if words is None else words.nbytes
            if used > budget:
                return

    def _unit(self, p: int, fb: int, budget: int | None = None) -> tuple:
        """Generic unit (p, fb): its live tokens (within ``budget``) cut to ``follow(fb)``, as
        (ids, left positions, None) in left-spine order when at most SPARSE, else (None, None,
        packed words) (cached)."""
        key = (p, fb) if budget is None else (p, fb, budget)
        got = self._units.get(key)
        if got is None:
            ids = self.live_ids(p, 0, fb, DEAD, budget)
            ids = ids[self.word.step.follow(fb)[ids]]
            if len(ids) <= SPARSE:  # in left-spine order, for ``bitsets.set_outside``'s merge
                lpos = self.imp._lpos()[ids]
                order = np.argsort(lpos, kind="stable")
                got = (ids[order], lpos[order], None)
            else:
                got = (None, None, bitsets.from_ids(ids, self.nwords))
            self._units[key] = got
        return got

    def _special(self, p: int, cls: int, fb: int, node: int, budget: int | None = None) -> tuple:
        """A special member (START, WHOLE or a trie node): its live tokens (within ``budget``)
        that A_BPE allows after ``cls``, as (ids, None) when at most SPARSE, else (None, packed
        words, read-only) (cached)."""
        key = (p, cls, fb, node) if budget is None else (p, cls, fb, node, budget)
        got = self._specials.get(key)
        if got is None:
            ids = self.live_ids(p, cls, fb, node, budget)
            ids = ids[self.word.allowed(cls, fb)[ids]]
            words = None
            if len(ids) > SPARSE:
                ids, words = None, bitsets.from_ids(ids, self.nwords)
                words.flags.writeable = False
            got = self._specials[key] = (ids, words)
        return got

    def _class_rows(self) -> tuple[list[int], list[int]]:
        """Per class, the bounds a:b of its BANNED row in ``rows.lo``/``rows.hi`` (a = -1: the
        class ends every word, nothing follows it), as lists: one index per step, no arrays."""
        if self._row_bounds is None:
            imp, n_cls = self.imp, self.n_cls
            reps = self.word.step.rep_ids[:n_cls]
            ru = imp.rpos[reps].astype(np.int64)
            ptr = imp._rows().ptr
            a = np.where(ru >= 0, ptr[np.maximum(ru, 0)], 0)
            b = np.where(ru >= 0, ptr[np.maximum(ru, 0) + 1], 0)
            a = np.where(imp.may_continue[reps], a, -1)
            self._row_bounds = (a.tolist(), b.tolist())
        return self._row_bounds

    def member_words(self, p: int, cls: int, fb: int, node: int) -> np.ndarray:
        """One member's mask, packed: ``words([member])``."""
        return self.words(((p, cls, fb, node),))

    def words(self, members, out: np.ndarray | None = None, budget: int | None = None) -> np.ndarray:
        """The union of the members' masks, packed (``bitsets``): each member's live tokens that
        A_BPE allows after its class. A special member's (START, WHOLE, a node of the
        ignore_merges trie) is made at load; an ordinary class's is the unit's live tokens minus
        the class's BANNED row (left-spine intervals), written by a compiled kernel into the
        result: ``out`` (uint32 words, filled in place: no allocation per step, as the peers'
        fill APIs), else a new array, or a shared read-only one for a lone special member.
        Sets of at most SPARSE ids are kept as ids and set bit by bit: a step reads no more
        memory than it must. ``budget`` (``max_tokens``): only tokens after which a final state
        is within that many tokens; a member whose successors all are keeps its own sets."""
        if not self.warmed:
            self.warm()
        full, sparse, few, dense = [], [], [], []
        ra, rb, specials, units = self._ra, self._rb, self._specials, self._units
        for m in members:
            p, cls, fb, node = m
            b = None if budget is None or self.top(p, cls, fb, node) <= budget else budget
            if cls < 0 or node != DEAD:
                ids, words = (specials.get(m) if b is None else None) or self._special(p, cls, fb, node, b)
                (sparse if words is None else full).append(ids if words is None else words)
            elif ra[cls] >= 0:  # else nothing follows this class inside a word
                ids, lpos, words = (units.get((p, fb)) if b is None else None) or self._unit(p, fb, b)
                (few if words is None else dense).append((ids, lpos, words, ra[cls], rb[cls]))
        if out is not None and len(out) != self.nwords:  # the kernels do not check bounds
            raise UsageError(f"out has {len(out)} words; this vocabulary needs {self.nwords}")
        if out is None:
            if len(full) == 1 and not (sparse or few or dense):
                return full[0]
            out = np.empty(self.nwords, bitsets.WORD)
        k, lo, hi, lorder = self._k, self._lo, self._hi, self._lorder
        if dense:  # the first dense member is made in place, before any other bit is set
            _, _, words, a, b = dense[0]
            np.copyto(out, words)
            k.clear_intervals(out, lo, hi, a, b, lorder)
            for _, _, words, a, b in dense[1:]:
                w = words.copy()
                k.clear_intervals(w, lo, hi, a, b, lorder)
                np.bitwise_or(out, w, out=out)
        elif full:
            np.copyto(out, full.pop())
        else:
            out.fill(0)
        for w in full:
            np.bitwise_or(out, w, out=out)
        for ids in sparse:
            k.set_ids(out, ids)
        for ids, lpos, _, a, b in few:  # a few live tokens, merged with the row's intervals
            k.set_outside(out, ids, lpos, lo, hi, a, b)
        return out

    def to_arrays(self) -> dict[str, np.ndarray]:
        out = {"pair_keys": self.pair_keys, "live_bits": np.packbits(self.live, axis=1),
               "special_keys": self.special_keys, "special_live": self.special_live}
        if self.dist is not None:  # as uint32, none within the limit: NO_PATH
            for name, d in (("dist", self.dist), ("special_dist", self.special_dist)):
                out[name] = np.where(d == self.far, np.uint32(NO_PATH), d.astype(np.uint32))
        return out

    @classmethod
    def from_arrays(cls, word: Word, arcs: Arcs, a: dict[str, np.ndarray]) -> Liveness:
        n_cls = int(word.classes.max()) + 1 if (word.classes >= 0).any() else 0
        bits = a["live_bits"]
        if bits.shape[1] != (n_cls + 8) // 8:
            raise InternalError(f"co-reachability table of width {bits.shape[1]} for {n_cls} classes")
        live = np.unpackbits(bits, axis=1, count=n_cls + 1).astype(bool)
        dist, sdist = a.get("dist"), a.get("special_dist")
        if dist is not None:
            dist = np.asarray(dist, np.uint32).reshape(len(live), n_cls + 1)
            sdist = np.asarray(sdist, np.uint32)
            if ((dist != NO_PATH) != live).any() or ((sdist != NO_PATH) != a["special_live"].astype(bool)).any():
                raise InternalError("distances and liveness disagree")
        return cls(word, arcs, a["pair_keys"], live, a["special_keys"], a["special_live"].astype(bool), dist, sdist)
