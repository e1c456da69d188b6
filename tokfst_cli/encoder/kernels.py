"""The compiled kernel of the encoder (numba, cached on disk; ``automata.bitset_kernels.jit_all``):
HF's ``Word::merge_all`` on one pre-token's symbols (Incremental BPE 2026 Sec. 2, the baseline
every BPE implementation shares). Imported lazily: numba loads LLVM.

Merges are looked up in a sorted array of pair keys ``left * V + right`` (binary search); the
queue is a binary heap on (rank, position) in arrays, an entry stale when the pair at its
position no longer makes its token (as HF's). O(n log n) in the pre-token's length: at most
n - 1 + 2 (n - 1) entries are pushed, so ``work`` (the entries popped, each O(log n)) is at most
3 per symbol, whatever the text.
"""

from __future__ import annotations

import numpy as np

from tokfst_cli.automata.bitset_kernels import jit_all


def _find(keys, key):  # pragma: no cover - compiled
    lo, hi = 0, keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < keys.shape[0] and keys[lo] == key else -1


def _push(hr, hp, hn, size, rank, pos, new):  # pragma: no cover - compiled
    i = size
    hr[i], hp[i], hn[i] = rank, pos, new
    while i > 0:
        parent = (i - 1) >> 1
        if hr[parent] < hr[i] or (hr[parent] == hr[i] and hp[parent] <= hp[i]):
            break
        hr[i], hr[parent] = hr[parent], hr[i]
        hp[i], hp[parent] = hp[parent], hp[i]
        hn[i], hn[parent] = hn[parent], hn[i]
        i = parent
    return size + 1


def _pop(hr, hp, hn, size):  # pragma: no cover - compiled
    size -= 1
    hr[0], hp[0], hn[0] = hr[size], hp[size], hn[size]
    i = 0
    while True:
        a, b, m = 2 * i + 1, 2 * i + 2, i
        if a < size and (hr[a] < hr[m] or (hr[a] == hr[m] and hp[a] < hp[m])):
            m = a
        if b < size and (hr[b] < hr[m] or (hr[b] == hr[m] and hp[b] < hp[m])):
            m = b
        if m == i:
            return size
        hr[i], hr[m] = hr[m], hr[i]
        hp[i], hp[m] = hp[m], hp[i]
        hn[i], hn[m] = hn[m], hn[i]
        i = m


def _merge_all(c, keys, ranks, news, v):  # pragma: no cover - compiled
    n = c.shape[0]
    prev = np.arange(-1, n - 1)
    nxt = np.arange(1, n + 1)
    alive = np.ones(n, np.bool_)
    cap = 3 * n + 1
    hr, hp, hn = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64)
    size, work = 0, 0
    for i in range(n - 1):
        k = _find(keys, c[i] * v + c[i + 1])
        if k >= 0:
            size = _push(hr, hp, hn, size, ranks[k], i, news[k])
    while size > 0:
        pos, new = hp[0], hn[0]
        size = _pop(hr, hp, hn, size)
        work += 1
        if not alive[pos] or nxt[pos] >= n:
            continue
        right = nxt[pos]
        k = _find(keys, c[pos] * v + c[right])
        if k < 0 or news[k] != new:
            continue  # stale
        c[pos] = new
        alive[right] = False
        nxt[pos] = nxt[right]
        if nxt[pos] < n:
            prev[nxt[pos]] = pos
        if prev[pos] >= 0:
            k = _find(keys, c[prev[pos]] * v + new)
            if k >= 0:
                size = _push(hr, hp, hn, size, ranks[k], prev[pos], news[k])
        if nxt[pos] < n:
            k = _find(keys, new * v + c[nxt[pos]])
            if k >= 0:
                size = _push(hr, hp, hn, size, ranks[k], pos, news[k])
    return c[alive], work


(_find, _push, _pop), _ = jit_all(_find, _push, _pop)
(merge_all,), CACHED = jit_all(_merge_all)


def merge_table(merges: dict[tuple[int, int], tuple[int, int]], vocab_size: int) -> tuple[np.ndarray, ...]:
    """(keys, ranks, new ids) sorted by key, from ``HfBpe.merges`` (pair -> (rank, new id))."""
    pairs = np.array(list(merges), np.int64).reshape(-1, 2)
    values = np.array(list(merges.values()), np.int64).reshape(-1, 2)
    keys = pairs[:, 0] * vocab_size + pairs[:, 1]
    order = np.argsort(keys, kind="stable")
    return keys[order], values[order, 0].copy(), values[order, 1].copy()
