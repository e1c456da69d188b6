"""Co-reachability of the factorized canonical BPE product: masks without dead ends (Pitfalls 2025 Sec. 3.2).

The factorized decoder pairs a state p of S (or S_M, over pre-tokenized text) with A_BPE's
per-word state (class of the last token, byte-fallback state fb, node of the ignore_merges
trie). Its raw mask, allowed(p) minus BANNED(class), may offer a token after which no
canonical completion exists. Here the live product states (those from which a final state is
reachable) are computed without materializing the product's arcs, as a least fixpoint over
*units*:

- a generic unit (p, fb) holds one bit per class (plus WHOLE, after an ignore_merges
  whole-word token), for the trie node DEAD. Its tokens are live after class c iff
  L = {v at p whose successor is live} is not inside BANNED(c): with L as weights over left
  spine positions, |L inside row(c)| is a prefix-sum difference per banned interval, so all
  classes are decided in one vectorized pass;
- a special unit (p, fb, k) is a word start (the trie's root, class START) or a node k of the
  ignore_merges trie; it is decided directly from its arcs.

A unit is live if it may end (final state, or a pre-token boundary into a live word start) or
one of its tokens leads to a live unit. The units a decoder reaches are explored first, each
token with the table cell of the member it leads to (``units``); starting from nothing live and
re-evaluating the units whose successors changed reaches the least fixpoint (a class once live
stays live: a unit evaluated again decides only the others). ``Liveness`` then gives a member's mask:
``live_next(member)`` is the tokens whose successor member is live, ``member_words(member)``
the packed mask (the unit's live tokens, made at load, minus the class's BANNED row, cleared by
a compiled kernel at each step: ``bitsets``).
"""

from __future__ import annotations

import numpy as np

from tokfst_cli.bpe.fewest import layers
from tokfst_cli.bpe.implicit import ImplicitBpe
from tokfst_cli.bpe.live_table import Arcs, Liveness
from tokfst_cli.bpe.units import UnitGraph, explore, special_unit
from tokfst_cli.bpe.word import DEAD, Word
from tokfst_cli.errors import LimitError


class _ClassRows:
    """BANNED rows of the classes' representatives, as one CSR over left spine positions."""

    def __init__(self, imp: ImplicitBpe, word: Word, n_cls: int):
        rows = imp._rows()
        reps = word.step.rep_ids[:n_cls]  # classes are numbered 0..n_cls-1
        self.cont = imp.may_continue[reps]
        self.ends = imp.may_end[reps]
        r = imp.rpos[reps].astype(np.int64)
        has = r >= 0
        counts = np.where(has, rows.ptr[np.where(has, r, 0) + 1] - rows.ptr[np.where(has, r, 0)], 0)
        self.ptr = np.r_[0, np.cumsum(counts)]
        first = np.repeat(rows.ptr[np.where(has, r, 0)], counts)
        idx = first + np.arange(int(self.ptr[-1])) - np.repeat(self.ptr[:-1], counts)
        self.lo, self.hi = rows.lo[idx], rows.hi[idx]
        self.nleft = len(imp.lorder)
        cover = np.zeros(self.nleft + 2, np.int64)  # left positions inside some class's row
        np.add.at(cover, self.lo, 1)
        np.add.at(cover, self.hi + 1, -1)
        lpos = imp._lpos()
        self.lpos = np.where(lpos >= 0, lpos, self.nleft)  # not in any row: the sentinel position
        self.never = np.r_[np.cumsum(cover)[:self.nleft] == 0, True][self.lpos]  # token banned after no class

    def subset(self, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lo, hi, ptr) of the rows of ``classes`` only, as one CSR."""
        counts = self.ptr[classes + 1] - self.ptr[classes]
        ptr = np.r_[0, np.cumsum(counts)]
        idx = np.repeat(self.ptr[classes], counts) + np.arange(int(ptr[-1])) - np.repeat(ptr[:-1], counts)
        return self.lo[idx], self.hi[idx], ptr

    def escape(self, tokens: np.ndarray, classes: np.ndarray, rows: tuple) -> np.ndarray:
        """Per class of ``classes`` (rows = ``subset(classes)``): is some token of ``tokens``
        (distinct ids) outside the class's BANNED row?"""
        if not len(tokens):
            return np.zeros(len(classes), bool)
        if self.never[tokens].any():
            return self.cont[classes]
        return self.cont[classes] & (self.inside(self.lpos[tokens], *rows) < len(tokens))

    def inside(self, pos: np.ndarray, lo: np.ndarray, hi: np.ndarray, ptr: np.ndarray) -> np.ndarray:
        """Per row of the CSR (lo, hi, ptr): how many of the distinct left positions ``pos`` lie
        inside its intervals (binary search over ``pos`` sorted, or prefix sums where cheaper)."""
        if len(pos) <= 16 or len(lo) * 16 < self.nleft:
            pos = np.sort(pos)
            seg = np.searchsorted(pos, hi, "right") - np.searchsorted(pos, lo, "left")
        else:
            w = np.zeros(self.nleft + 2, np.int32)
            w[pos + 1] = 1
            pref = np.cumsum(w)
            seg = pref[hi + 1] - pref[lo]
        cs = np.concatenate(([0], np.cumsum(seg)))
        return cs[ptr[1:]] - cs[ptr[:-1]]


def class_rows(imp: ImplicitBpe, word: Word, n_cls: int) -> _ClassRows:
    """One _ClassRows per loaded artifact."""
    got = imp.derived.get("class_rows")
    if got is None:
        got = imp.derived["class_rows"] = _ClassRows(imp, word, n_cls)
    return got


def compute(word: Word, arcs: Arcs, finals: np.ndarray, start: int, max_cells: int = 500_000_000,
            limit: int | None = None) -> Liveness:
    """The least fixpoint of live units (module docstring) over the units a decoder reaches
    (``units.explore``); LimitError past ``max_cells`` table cells. ``limit`` (``max_tokens``
    N): the fewest tokens from each member to a final state, up to N, by layers
    (``fewest.layers``); members with none within N are not live."""
    imp = word.imp
    n_cls = int(word.classes.max()) + 1 if (word.classes >= 0).any() else 0
    rows = class_rows(imp, word, n_cls) if n_cls else None
    graph = explore(word, arcs, start)
    if graph.generic * graph.width > max_cells:
        raise LimitError("the co-reachability table", "max_cells", max_cells, graph.generic * graph.width,
                         remedy="table", unit="cells", at_least=True)
    preds = graph.preds()
    if limit is not None:
        return _layered(word, arcs, graph, preds, rows, finals, limit)
    val = _fixpoint(graph, preds, rows, finals, bool(imp.fb_final[0]))
    keys = np.array([key for kind, key in graph.units if kind == "g"], np.int64)  # in row order
    order = np.argsort(keys)
    live = val[:graph.generic * graph.width].reshape(graph.generic, graph.width)[order]
    spec = [(key, graph.slot[u]) for u, (kind, key) in enumerate(graph.units) if kind == "s"]
    spec.sort()
    skeys = np.array([k for k, _ in spec], np.int64)
    return Liveness(word, arcs, keys[order], live, skeys, val[np.array([c for _, c in spec], np.int64)])


def _layered(word: Word, arcs: Arcs, graph: UnitGraph, preds: list[list[int]], rows: _ClassRows | None,
             finals: np.ndarray, limit: int) -> Liveness:
    """``compute(limit=N)``: ``fewest.layers`` over the units, deciding each unit from its arcs
    and a layer's successor distances (``succ_ok``, ``end_ok``)."""
    imp = word.imp
    n_fb, n_cls = len(imp.fb_final), graph.width - 1
    relevant, cptr = graph.relevant()
    row_in_graph = {key: int(graph.row[u]) for u, (kind, key) in enumerate(graph.units) if kind == "g"}
    gkeys = np.array(sorted(row_in_graph), np.int64)
    row_of = {k: r for r, k in enumerate(gkeys.tolist())}
    spec_ids = {key: u for u, (kind, key) in enumerate(graph.units) if kind == "s"}
    memo: dict[tuple[bytes, bytes], np.ndarray] = {}
    subsets: dict[bytes, tuple] = {}

    def generic_row(key: int, succ_ok, end_ok) -> np.ndarray:
        """The classes (and WHOLE) of unit (p, fb) that are live, given which successor members
        are (``succ_ok``) and whether p may end (``end_ok``)."""
        p, fb = divmod(key, n_fb)
        labels, nexts, after = arcs(p)
        keep = word.step.follow(fb)[labels]  # allowed, may follow, and the fallback-DFA condition
        labels, nexts = labels[keep], nexts[keep]
        cs, fs, ns = word.after(0, fb, DEAD, labels)
        tokens = labels[succ_ok(nexts, cs, fs, ns)]
        r = row_in_graph[key]
        classes = relevant[cptr[r]:cptr[r + 1]]  # the classes a member of the unit can have
        kept = classes.tobytes()  # units reached by the same classes share their rows' CSR
        sig = (kept, tokens.tobytes())
        row = memo.get(sig)
        if row is None:
            if kept not in subsets and rows is not None:
                subsets[kept] = rows.subset(classes)
            row = memo[sig] = rows.escape(tokens, classes, subsets[kept]) if rows is not None else np.zeros(0, bool)
        new = np.zeros(n_cls + 1, bool)
        new[classes] = row
        if end_ok(p, after):
            new[n_cls] = True  # WHOLE may always end
            if fb == 0 and imp.fb_final[0]:
                new[:n_cls] |= rows.ends
        return new

    def special_bit(key: int, succ_ok, end_ok) -> bool:
        p, fb, node, cls = special_unit(key, n_fb, word)
        labels, nexts, after = arcs(p)
        allowed = word.allowed(cls, fb)[labels]
        labels, nexts = labels[allowed], nexts[allowed]
        cs, fs, ns = word.after(cls, fb, node, labels)
        return bool(succ_ok(nexts, cs, fs, ns).any()) or (word.ends(cls, fb, node) and end_ok(p, after))

    return layers(word, arcs, graph.units, preds, graph.after, gkeys, row_of, spec_ids, n_cls, limit, finals,
                  generic_row, special_bit)


def _fixpoint(graph: UnitGraph, preds: list[list[int]], rows: _ClassRows | None, finals: np.ndarray,
              fb_final: bool) -> np.ndarray:
    """The live cells (``units``): from nothing live, each unit re-evaluated when a successor
    changed, reading its tokens' cells. A generic row's class c is live when some token with a
    live successor lies outside BANNED(c) (``_ClassRows.inside``), WHOLE when the unit may end."""
    width, n_cls = graph.width, graph.width - 1
    val = np.zeros(graph.cells, bool)
    classes, cptr = graph.relevant()
    cp = cptr.tolist()
    sets: dict[bytes, int] = {}  # rows with one set of classes share its BANNED rows' intervals
    group = [sets.setdefault(classes[cp[r]:cp[r + 1]].tobytes(), len(sets)) for r in range(graph.generic)]
    if rows is not None:
        never, lp, ends = rows.never[graph.label], rows.lpos[graph.label], rows.ends
        each = [np.frombuffer(k, classes.dtype) for k in sets]  # the distinct sets, in order, as one CSR
        lo, hi, iptr = rows.subset(np.concatenate(each) if each else classes[:0])
        sp = np.cumsum([0, *map(len, each)]).tolist()
        ip = iptr.tolist()
    ptr, row, slot, bnd = (x.tolist() for x in (graph.ptr, graph.row, graph.slot, graph.boundary))
    final = finals[graph.state].tolist()
    word_ends = graph.ends.tolist()
    fb0 = ((graph.fb == 0) & fb_final).tolist()
    cell = graph.cell
    queue = list(range(len(graph.units)))  # reverse discovery order first: successors before predecessors
    queued = [True] * len(queue)
    while queue:
        u = queue.pop()
        queued[u] = False
        a, b = ptr[u], ptr[u + 1]
        ok = val[cell[a:b]]
        end = final[u] or (bnd[u] >= 0 and bool(val[bnd[u]]))
        r = row[u]
        if r >= 0:
            c0, c1 = cp[r], cp[r + 1]
            k = int(np.count_nonzero(ok))
            r0, add = r * width, None  # a class once live stays live (the fixpoint only adds): the others are decided
            if k and c1 > c0:
                cls = classes[c0:c1]
                todo = ~val[r0 + cls]
                if not todo.any():
                    add = None
                elif (never[a:b] & ok).any():
                    add = cls[todo & rows.cont[cls]]
                elif todo.all():
                    s0, s1 = sp[group[r]], sp[group[r] + 1]
                    i0, i1 = ip[s0], ip[s1]
                    counts = rows.inside(lp[a:b][ok], lo[i0:i1], hi[i0:i1], iptr[s0:s1 + 1] - i0)
                    add = cls[rows.cont[cls] & (counts < k)]
                else:
                    left = cls[todo]
                    add = left[rows.cont[left] & (rows.inside(lp[a:b][ok], *rows.subset(left)) < k)]
            changed = add is not None and len(add) > 0
            if changed:
                val[r0 + add] = True
            if end and not val[r0 + n_cls]:  # WHOLE may always end (set once)
                val[r0 + n_cls] = changed = True
                if fb0[u] and rows is not None:
                    val[r0:r0 + n_cls] |= ends
            if not changed:
                continue
        else:
            bit = bool(ok.any()) or (word_ends[u] and end)
            if bit == val[slot[u]]:
                continue
            val[slot[u]] = bit
        for v in preds[u]:
            if not queued[v]:
                queued[v] = True
                queue.append(v)
    return val
