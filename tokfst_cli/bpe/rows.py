"""Stage C for BPE: the banned rectangles of the implicit A_BPE as rows, and its classes (states).

``Rows``: for every right-spine position, the sorted disjoint intervals of left-spine positions
that BANNED holds (CSR), built from the rectangles without a per-token Python loop. A pair test
is then one binary search, a BANNED row a handful of slices.

``classes``: tokens with identical BANNED rows share one class, the state q_u of A_BPE. Rows are
grouped by a 128-bit hash of their intervals and every group is then checked interval by
interval; on a collision (never seen) they are grouped exactly, so two states are never merged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Rows:
    """ptr[p]:ptr[p + 1] are right position p's intervals [lo, hi]; ``keys`` = row * width + lo."""

    ptr: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    keys: np.ndarray
    width: int


def build(boxes: np.ndarray, nright: int, nleft: int) -> Rows:
    """Expand rectangles (u_lo, u_hi, v_lo, v_hi) into merged per-row intervals."""
    b = boxes.astype(np.int64).reshape(-1, 4)
    b = b[np.argsort(b[:, 2], kind="stable")]  # expanded in v_lo order; a stable sort by row keeps it
    lens = b[:, 1] - b[:, 0] + 1
    total = int(lens.sum())
    starts = np.cumsum(lens) - lens
    it = np.int32 if max(total, nright, len(b), nleft + 2) < 2**31 else np.int64
    upos = np.arange(total, dtype=it) - np.repeat((starts - b[:, 0]).astype(it), lens)
    order = np.argsort(upos, kind="stable")
    del upos
    diff = np.zeros(nright + 1, np.int64)
    np.add.at(diff, b[:, 0], 1)
    np.add.at(diff, b[:, 1] + 1, -1)
    counts = np.cumsum(diff[:nright])
    box = np.repeat(np.arange(len(b), dtype=it), lens)[order]
    del order
    lo, hi = b[:, 2].astype(it)[box], b[:, 3].astype(it)[box]
    del box
    rstart = np.cumsum(counts) - counts
    nonempty = np.flatnonzero(counts)
    if total:  # merge each row's intervals (sorted by lo): a new one starts past the running end + 1
        span = int(hi.max()) + 2
        off = np.repeat(np.arange(nright, dtype=np.int64) * span, counts)
        running = hi + off
        np.maximum.accumulate(running, out=running)
        running -= off
        del off
        start = np.zeros(total, bool)
        start[rstart[nonempty]] = True
        start[1:] |= lo[1:] > running[:-1] + 1
        del running
        first = np.flatnonzero(start)
        lo, hi = lo[first].astype(np.int64), np.maximum.reduceat(hi, first).astype(np.int64)
        per = np.add.reduceat(start, rstart[nonempty], dtype=np.int64) if len(nonempty) else np.zeros(0, np.int64)
        counts = np.zeros(nright, np.int64)
        counts[nonempty] = per
    else:
        lo = hi = np.zeros(0, np.int64)
    ptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
    upos = np.repeat(np.arange(nright, dtype=np.int64), counts)
    width = nleft + 1
    return Rows(ptr, lo, hi, upos * width + lo, width)


def lookup(rows: Rows, ru: np.ndarray, lv: np.ndarray) -> np.ndarray:
    """Vectorized: is left position lv[i] inside one of right position ru[i]'s intervals?"""
    if not len(rows.keys) or not len(ru):
        return np.zeros(len(ru), bool)
    q = ru * rows.width + lv
    order = np.argsort(q)  # sorted queries search the sorted keys far faster
    idx = np.empty(len(q), np.int64)
    idx[order] = np.searchsorted(rows.keys, q[order], side="right") - 1
    inrow = (idx >= rows.ptr[ru]) & (idx >= 0)
    hit = np.zeros(len(q), bool)
    hit[inrow] = rows.hi[idx[inrow]] >= lv[inrow]
    return hit


def row_positions(rows: Rows, ru: int) -> np.ndarray:
    """All left positions banned in right position ru's row."""
    return expand(rows.lo[rows.ptr[ru]:rows.ptr[ru + 1]], rows.hi[rows.ptr[ru]:rows.ptr[ru + 1]])


def expand(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Every position of the inclusive intervals [lo[i], hi[i]], interval by interval."""
    lens = hi - lo + 1
    return np.repeat(lo - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()))


def _mix(x: np.ndarray, salt: int) -> np.ndarray:
    """splitmix64 of x + salt (uint64, wrapping)."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64(salt)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def classes(rows: Rows, rpos: np.ndarray, allowed: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Class id per token: equal (flags, BANNED row) -> equal class; -1 where not allowed.
    Ids are numbered by each class's least token."""
    n = len(rpos)
    nrows = len(rows.ptr) - 1
    count = np.diff(rows.ptr)
    owner = np.repeat(np.arange(nrows), count)
    with np.errstate(over="ignore"):
        h1 = np.zeros(nrows, np.uint64)
        h2 = np.zeros(nrows, np.uint64)
        if len(owner):
            np.add.at(h1, owner, _mix(rows.lo, 1) ^ _mix(rows.hi, 2))
            np.add.at(h2, owner, _mix(rows.lo * 3 + 1, 3) + _mix(rows.hi, 4))
    toks = np.flatnonzero(allowed)
    r = rpos[toks]
    has = r >= 0
    rr = np.where(has, r, 0)
    cols = [flags[toks].astype(np.uint64), np.where(has, count[rr], 0).astype(np.uint64),
            np.where(has, h1[rr], 0), np.where(has, h2[rr], 0)]
    order = np.lexsort(cols[::-1])
    change = np.zeros(len(toks), bool)
    change[:1] = True
    for c in cols:
        cs = c[order]
        change[1:] |= cs[1:] != cs[:-1]
    group = np.cumsum(change) - 1
    inverse = np.empty(len(toks), np.int64)
    inverse[order] = group
    starts = np.flatnonzero(change)
    first = np.minimum.reduceat(order, starts) if len(starts) else np.zeros(0, np.int64)
    if not _groups_agree(rows, toks, rr, has, first, inverse):  # a hash collision (never seen): group exactly
        keys: dict[tuple, int] = {}
        inverse = np.array([keys.setdefault((int(f), rows.lo[rows.ptr[x]:rows.ptr[x + 1]].tobytes(),
                                             rows.hi[rows.ptr[x]:rows.ptr[x + 1]].tobytes()) if h else (int(f),),
                                            len(keys)) for f, x, h in zip(flags[toks], rr, has)], np.int64)
        first = np.unique(inverse, return_index=True)[1]
    # number classes by first token (ascending ids), as a per-token scan would
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    cls = np.full(n, -1, np.int64)
    cls[toks] = rank[inverse]
    return cls


def _groups_agree(rows: Rows, toks, rr, has, first, inverse) -> bool:
    """Every member's row equals its group representative's, interval by interval."""
    rep = first[inverse]  # index (into toks) of each token's representative
    diff = np.flatnonzero(has & (rep != np.arange(len(toks))))
    if not len(diff):
        return True
    a, b = rr[diff], rr[rep[diff]]
    cnt = rows.ptr[a + 1] - rows.ptr[a]
    off = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    ia, ib = np.repeat(rows.ptr[a], cnt) + off, np.repeat(rows.ptr[b], cnt) + off
    return bool(np.array_equal(cnt, rows.ptr[b + 1] - rows.ptr[b]) and np.array_equal(rows.lo[ia], rows.lo[ib])
                and np.array_equal(rows.hi[ia], rows.hi[ib]))


def count(rows: Rows, weights: np.ndarray) -> np.ndarray:
    """Per right position: the total weight of its banned left positions (weights by left position)."""
    pref = np.r_[0, np.cumsum(weights, dtype=np.int64)]
    per = np.zeros(len(rows.ptr) - 1, np.int64)
    if len(rows.lo):
        seg = pref[rows.hi + 1] - pref[rows.lo]
        owner = np.repeat(np.arange(len(per)), np.diff(rows.ptr))
        np.add.at(per, owner, seg)
    return per
