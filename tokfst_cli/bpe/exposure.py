"""Stage C for BPE: pairs with a non-monotone token, from the moments of its trace.

The rectangle condition of :mod:`.canonical` assumes HF pops a token's merges in increasing
(rank, position) order. Merge lists converted from rank tables break that for some tokens (a
merge ranked before its operand's creation fires as soon as the operand exists). This module
states the general condition and applies it to every pair with such a token, exactly.

The general condition. On text(u) text(v), before any merge crosses the boundary the two
halves run their own traces: a heap entry spans the symbols it was pushed for, symbols only
grow, so an entry of one half never fires on the other, and the only entry that joins them is
the one pushed for the current boundary pair (an older one spans a symbol since absorbed). The
heap interleaves the halves by key, u's pops first on equal rank (smaller positions).
Let u's pops have ranks h_1..h_m and top(t) = max(h_1..h_t) (-1 for t = 0); at *moment* t
(after t pops) the rightmost symbol of u's half is R(t) and its next pop has rank h_{t+1}
(infinite after the last). Interleaving two sequences by comparing their heads orders them by
prefix maxima, so the moments (t, t') that occur together are those whose clock intervals
    [2 top(t), 2 top(t+1)]   and   (2 top'(t') + 1, 2 top'(t'+1) + 1)
overlap. The cross pair (R(t), L(t')), a merge of rank r, then pops (and fires: nothing else
can have changed it) iff r < h_{t+1} and r <= h'_{t'+1}. Clipping each clock interval at r
changes no overlap, so with lo = top(t), hi = top(t+1), nxt = h_{t+1} per moment:

    (u, v) is banned  iff  some merge (a, b) of rank r, a moment t of u with R(t) = a and a
    moment t' of v with L(t') = b have  nxt > r,  nxt' >= r,  max(lo, r) <= hi',  max(lo', r) < hi.

A monotone token's moments with a given end symbol form a chain from the symbol's creation rank
rc to its consumption rank rk, with nxt = hi, and the condition collapses to the rectangle one.
With one side monotone it collapses to a threshold on the other side's rk, which is an interval
of the spine order (``SpineOrder.interval``):
- u not monotone, v monotone: v is banned through (a, b) iff rk_v(b) >= theta, with theta the
  least max(lo, r) over u's moments on a with nxt > r and hi > max(rc(b), r);
- u monotone, v not: u is banned iff rk_u(a) > phi, with phi the least max(lo', r) over v's
  moments on b with nxt' >= r and hi' >= max(rc(a), r);
- both not monotone: the condition itself, over the pairs whose spines share a merge.
Every cross merge joins a right-spine token of u with a left-spine token of v, so no other pair
can be banned. ``rows``/``columns`` return (token, lo, hi) intervals of the other side's spine
order; ``implicit`` stores them as rectangles of one row or one column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokfst_cli.automata.arrays import unique
from tokfst_cli.bpe.canonical import SpineOrder
from tokfst_cli.bpe.hf import HfBpe
from tokfst_cli.bpe.trace import INF, Derivations, MergeTable, spines
from tokfst_cli.tokenizer.model import TokenizerModel, model_text


@dataclass
class Moments:
    """The moments of every non-monotone token, per end symbol (an *exposure*): exposure k is
    (token[k], sym[k]) with moments ptr[k]:ptr[k+1] of lo, hi, nxt."""

    token: np.ndarray
    sym: np.ndarray
    ptr: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    nxt: np.ndarray


def _build(rows: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]) -> Moments:
    token = np.array([r[0] for r in rows], np.int64)
    sym = np.array([r[1] for r in rows], np.int64)
    counts = np.array([len(r[2]) for r in rows], np.int64)
    ptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
    cat = (lambda i: np.concatenate([r[i] for r in rows]).astype(np.int64)) if rows else \
        (lambda i: np.zeros(0, np.int64))
    return Moments(token, sym, ptr, cat(2), cat(3), cat(4))


def moments(model: TokenizerModel, hf: HfBpe, tokens: np.ndarray) -> tuple[Moments, Moments]:
    """Right-end and left-end exposures of the given tokens (their own traces)."""
    right, left = [], []
    for t in tokens.tolist():
        text, pre, suf = model_text(model, t)
        sp = spines(hf, hf.initial_symbols(text, prefix_first=pre, suffix_last=suf))
        hi = np.maximum(sp.top, sp.h)
        for side, out in ((sp.right, right), (sp.left, left)):
            for sym, s, e in side:
                out.append((t, sym, sp.top[s:e], hi[s:e], sp.h[s:e]))
    return _build(right), _build(left)


def _expand(ex: Moments, keys: np.ndarray, width: int):
    """Pairs (exposure, merge) where the merge's operand (``keys`` = operand * width + other, sorted)
    is the exposure's symbol, then pairs (exposure, merge, moment). Returns the merge index per
    pair, the pair index per moment row, and the moment per moment row."""
    lo = np.searchsorted(keys, ex.sym * width)
    hi = np.searchsorted(keys, (ex.sym + 1) * width)
    cnt = hi - lo
    pair_x = np.repeat(np.arange(len(ex.sym)), cnt)
    pair_m = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt) + np.repeat(lo, cnt)
    mcnt = np.diff(ex.ptr)[pair_x]
    row_pair = np.repeat(np.arange(len(pair_x)), mcnt)
    row_t = np.arange(mcnt.sum()) - np.repeat(np.cumsum(mcnt) - mcnt, mcnt) + np.repeat(ex.ptr[pair_x], mcnt)
    return pair_x, pair_m, row_pair, row_t


def _least(values: np.ndarray, row_pair: np.ndarray, npairs: int) -> np.ndarray:
    """Per pair, the least of its rows' values (rows grouped by pair, every pair has one)."""
    if not npairs:
        return np.zeros(0, np.int64)
    starts = np.searchsorted(row_pair, np.arange(npairs))
    return np.minimum.reduceat(values, starts)


def rows(ex: Moments, table: MergeTable, der: Derivations, left: SpineOrder, mono: np.ndarray) -> np.ndarray:
    """(u, v_lo, v_hi): for non-monotone u, the monotone v it bans, as left-order intervals."""
    pair_x, pair_m, row_pair, row_t = _expand(ex, table.keys, table.v)
    b, r = table.b[pair_m], table.rank[pair_m]
    rp, rb = r[row_pair], b[row_pair]
    ok = (ex.nxt[row_t] > rp) & (ex.hi[row_t] > np.maximum(der.rc[rb], rp)) & mono[rb]
    theta = _least(np.where(ok, np.maximum(ex.lo[row_t], rp), INF), row_pair, len(pair_x))
    keep = theta < INF
    v_lo, v_hi = left.interval(b[keep], theta[keep], strict=False)
    return np.stack([ex.token[pair_x[keep]], v_lo, v_hi], axis=1).reshape(-1, 3)


def columns(ex: Moments, table: MergeTable, der: Derivations, right: SpineOrder, mono: np.ndarray) -> np.ndarray:
    """(v, u_lo, u_hi): for non-monotone v, the monotone u that ban it, as right-order intervals."""
    pair_y, pair_m, row_pair, row_t = _expand(ex, table.keys_by_b, table.v)
    m = table.by_b[pair_m]
    a, r = table.a[m], table.rank[m]
    rp, ra = r[row_pair], a[row_pair]
    ok = (ex.nxt[row_t] >= rp) & (ex.hi[row_t] >= np.maximum(der.rc[ra], rp)) & mono[ra]
    phi = _least(np.where(ok, np.maximum(ex.lo[row_t], rp), INF), row_pair, len(pair_y))
    keep = phi < INF
    u_lo, u_hi = right.interval(a[keep], phi[keep], strict=True)
    return np.stack([ex.token[pair_y[keep]], u_lo, u_hi], axis=1).reshape(-1, 3)


def pairs(rx: Moments, lx: Moments, table: MergeTable, chunk: int = 1 << 21) -> np.ndarray:
    """(u, v) banned with both u and v non-monotone: the general condition over every merge
    (a, b) with a an end symbol of u's right exposures and b of v's left ones.

    For a pair (u's exposure on a, merge m of rank r), u's valid moments (nxt > r) have
    nondecreasing lo and hi, so a moment of v with hi' >= r fires iff the last valid moment of u
    with lo <= hi' has hi > max(lo', r): one binary search per moment of v."""
    if not len(rx.token) or not len(lx.token):
        return np.zeros((0, 2), np.int64)
    order_y = np.argsort(lx.sym, kind="stable")  # left exposures grouped by symbol
    ysym = lx.sym[order_y]
    pair_x, pair_m, row_pair, row_t = _expand(rx, table.keys, table.v)
    b = table.b[pair_m]
    y_lo, y_hi = np.searchsorted(ysym, b), np.searchsorted(ysym, b, side="right")
    live = np.flatnonzero(y_hi > y_lo)
    r = table.rank[pair_m]
    # u's valid moments per (exposure, merge) pair, keyed pair * W + lo + 1 (sorted: lo ascends in t)
    valid = rx.nxt[row_t] > r[row_pair]
    vp, vt = row_pair[valid], row_t[valid]
    width = int(max(rx.lo.max(initial=0), lx.lo.max(initial=0))) + 3
    vkey = vp * width + rx.lo[vt] + 1
    vhi = rx.hi[vt]
    ymom = np.diff(lx.ptr)
    out = []
    start = 0
    while start < len(live):  # chunks of (pair, left exposure) triples
        cnt = (y_hi - y_lo)[live[start:]]
        stop = start + max(1, int(np.searchsorted(np.cumsum(cnt * ymom[order_y][y_lo[live[start:]]]), chunk)))
        ps = live[start:stop]
        n = y_hi[ps] - y_lo[ps]
        tri_p = np.repeat(ps, n)
        tri_y = order_y[np.repeat(y_lo[ps], n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)]
        k = ymom[tri_y]
        q_tri = np.repeat(np.arange(len(tri_p)), k)
        q_t = np.repeat(lx.ptr[tri_y], k) + np.arange(int(k.sum())) - np.repeat(np.cumsum(k) - k, k)
        rr = r[tri_p][q_tri]
        ok = lx.nxt[q_t] >= rr
        q_tri, q_t, rr = q_tri[ok], q_t[ok], rr[ok]
        qp = tri_p[q_tri]
        i = np.searchsorted(vkey, qp * width + np.minimum(lx.hi[q_t], width - 2) + 1, side="right") - 1
        hit = (i >= 0) & (vkey[np.maximum(i, 0)] // width == qp)
        hit[hit] = vhi[i[hit]] > np.maximum(lx.lo[q_t[hit]], rr[hit])
        fired = unique(q_tri[hit])
        out.append(np.stack([rx.token[pair_x[tri_p[fired]]], lx.token[tri_y[fired]]], axis=1))
        start = stop
    both = np.concatenate(out) if out else np.zeros((0, 2), np.int64)
    return np.unique(both, axis=0).reshape(-1, 2)
