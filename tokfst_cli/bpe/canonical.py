"""Stage C for BPE: spines and rectangles of the implicit canonical BPE automaton (Cognetta & Okazaki 2024 Sec. 6.5).

A sequence is canonical iff its tokens are reachable and every adjacent pair (u, v) is, so
A_BPE is fixed by BANNED(u) = {v : BPE(text(u) text(v)) != [u, v]}.

Derivation (:mod:`.trace`). For a reachable token t, HF's merge trace of text(t) ends in one merge
(x, y) -> t at rank rc(t) (rc = -1 for a single character). Its right spine is y's right spine
plus t, its left spine x's left spine plus t: two forests, where a token's parent is its right
(left) operand. A trace is *monotone* when HF pops its merges in increasing (rank, position)
order; a token whose operand is not monotone is not either, so the monotone tokens are a
sub-forest closed under parents.

Rectangles. On text(u) text(v) with u, v monotone, a merge m = (a, b) of rank r fires across
the boundary iff a is on u's right spine, b on v's left spine, and
    rk_u(a) > max(r, rc(b))   and   rk_v(b) >= max(r, rc(a)),
where rk_u(a) is the rank at which u's derivation consumes a (infinite if a = u); ties go to
the leftmost pair, hence > on the left and >= on the right. (A cross pair is pushed when both
operands exist and pops before any pending merge of higher key; a lower-ranked merge created
late, as in Llama-2, fires at once.) Ordering each forest in post-order with children by
ascending consumption rank, each condition selects one interval, so
    BANNED = union over merges m of U_m x V_m
with U_m an interval of the right-spine order and V_m one of the left-spine order. Pairs with
a non-monotone token are decided by the general condition of :mod:`.exposure`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokfst_cli.bpe.trace import Derivations, MergeTable, sorted_search
from tokfst_cli.tokenizer.model import model_text  # noqa: F401 - model_text re-exported

__all__ = ["SpineOrder", "spine_order", "rectangles", "model_text"]


@dataclass
class SpineOrder:
    """Post-order of a spine forest over its members: order[k] = token, pos[token] = k (-1 if not
    a member), first[token] = position where its subtree starts. Children are sorted by
    (rc, id); ``ckey``/``child`` list every member with a parent, sorted by parent * W + rc + 1."""

    order: np.ndarray
    pos: np.ndarray
    first: np.ndarray
    ckey: np.ndarray
    child: np.ndarray
    width: int

    def interval(self, node: np.ndarray, threshold: np.ndarray, strict: bool) -> tuple[np.ndarray, np.ndarray]:
        """Vectorized: positions [lo, hi] of {t in subtree(node) : the rank at which t's derivation
        consumes node (rc of node's child on the way to t; infinite for node itself) > threshold
        (>= unless strict)}. The qualifying children are a suffix of node's children."""
        node = np.asarray(node, np.int64)
        thr = np.clip(np.asarray(threshold, np.int64), -1, self.width - 2)
        q = node * self.width + thr + 1
        i = sorted_search(self.ckey, q, "right" if strict else "left")
        found = np.zeros(len(node), bool)
        ok = i < len(self.ckey)
        found[ok] = self.ckey[i[ok]] // self.width == node[ok]
        hi = self.pos[node]
        lo = hi.copy()
        lo[found] = self.first[self.child[i[found]]]
        return lo, hi


def spine_order(parent: np.ndarray, rc: np.ndarray, members: np.ndarray) -> SpineOrder:
    """Post-order the forest token -> parent (its right or left operand) over ``members``
    (closed under parents), children by ascending (rc, id); roots by id."""
    n = len(parent)
    par = np.where(members & (parent >= 0), parent, -1)
    par[par >= 0] = np.where(members[par[par >= 0]], par[par >= 0], -1)  # a parent outside: a root
    has_par = par >= 0
    depth = has_par.astype(np.int64)  # by pointer jumping
    up = par.copy()
    while True:
        idx = np.flatnonzero(up >= 0)
        if not len(idx):
            break
        depth[idx], up[idx] = depth[idx] + depth[up[idx]], up[up[idx]]
    mem = np.flatnonzero(members)
    by_depth = mem[np.argsort(depth[mem], kind="stable")]
    dsorted = depth[by_depth]
    bounds = np.searchsorted(dsorted, np.arange(int(dsorted.max()) + 2 if len(mem) else 1))
    size = members.astype(np.int64)
    for d in range(len(bounds) - 2, 0, -1):  # bottom-up subtree sizes
        nodes = by_depth[bounds[d]:bounds[d + 1]]
        np.add.at(size, par[nodes], size[nodes])
    width = int(rc.max()) + 3 if n else 2
    kids = mem[has_par[mem]]
    korder = np.lexsort((kids, rc[kids], par[kids]))
    kids = kids[korder]
    ckey = par[kids] * width + rc[kids] + 1
    # offset of each child inside its parent's subtree: sizes of the earlier siblings
    csz = size[kids]
    cum = np.cumsum(csz) - csz
    grp = np.r_[True, par[kids][1:] != par[kids][:-1]] if len(kids) else np.zeros(0, bool)
    gstart = np.maximum.accumulate(np.where(grp, np.arange(len(kids)), 0)) if len(kids) else np.zeros(0, np.int64)
    offset = np.zeros(n, np.int64)
    offset[kids] = cum - cum[gstart]
    roots = mem[~has_par[mem]]
    first = np.full(n, -1, np.int64)
    first[roots] = np.cumsum(size[roots]) - size[roots]
    for d in range(1, len(bounds) - 1):  # top-down subtree starts
        nodes = by_depth[bounds[d]:bounds[d + 1]]
        first[nodes] = first[par[nodes]] + offset[nodes]
    pos = np.full(n, -1, np.int64)
    pos[mem] = first[mem] + size[mem] - 1
    order = np.empty(len(mem), np.int64)
    order[pos[mem]] = mem
    return SpineOrder(order, pos, first, ckey, kids, width)


@dataclass
class Rectangles:
    """BANNED among monotone reachable tokens: rows [u_lo, u_hi] x cols [v_lo, v_hi] (spine positions)."""

    right: SpineOrder
    left: SpineOrder
    boxes: np.ndarray  # (k, 4) int64: u_lo, u_hi, v_lo, v_hi


def rectangles(der: Derivations, table: MergeTable) -> Rectangles:
    """One rectangle per effective merge (a, b) of two monotone tokens (a repeated pair keeps its last rank)."""
    mono = (der.reachable | der.fallback) & der.monotone
    right = spine_order(der.right, der.rc, mono)
    left = spine_order(der.left, der.rc, mono)
    a, b, r = table.a, table.b, table.rank
    keep = mono[a] & mono[b]
    a, b, r = a[keep], b[keep], r[keep]
    u_lo, u_hi = right.interval(a, np.maximum(r, der.rc[b]), strict=True)
    v_lo, v_hi = left.interval(b, np.maximum(r, der.rc[a]), strict=False)
    arr = np.stack([u_lo, u_hi, v_lo, v_hi], axis=1).reshape(-1, 4)
    return Rectangles(right, left, arr[np.lexsort((arr[:, 2], arr[:, 0]))])
