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


def _pair_encodes(sym, start, end, first, second, keys, ranks, news, v):  # pragma: no cover - compiled
    """Whether HF's merges turn sym[start:end] into [first, second] ([second] when first < 0)."""
    got, _ = merge_all(sym[start:end].copy(), keys, ranks, news, v)
    if first < 0:
        return got.shape[0] == 1 and got[0] == second
    return got.shape[0] == 2 and got[0] == first and got[1] == second


def _extend(sym, lo_i, hi_i, theta, size, done, longest, tkeys, tchild, ttok, atom, keys, ranks, news,
            v):  # pragma: no cover - compiled
    """theta and size of the prefixes lo_i + 1 .. hi_i (``incremental.EagerWord``): the suffix
    tokens ending at i read off the reversed-token trie (child of node n by symbol s at
    ``tkeys == n * v + s``), longest first, the first whose pair with theta(start) encodes to
    itself. Returns the pair checks run, or -1 - i when no token ends at i (never, for HF's BPE)."""
    checks = 0
    cand_s = np.empty(longest + 1, np.int64)
    cand_t = np.empty(longest + 1, np.int64)
    for i in range(lo_i + 1, hi_i + 1):
        nc, node, j = 0, 0, i - 1
        lo = max(done, i - longest)
        while j >= lo:
            s = sym[j]
            if atom[s] and j < i - 1:
                break
            k = _find(tkeys, node * v + s)
            if k < 0:
                break
            node = tchild[k]
            if ttok[node] >= 0:
                cand_s[nc], cand_t[nc] = j, ttok[node]
                nc += 1
            if atom[s]:
                break
            j -= 1
        found = False
        for c in range(nc - 1, -1, -1):
            start, t = cand_s[c], cand_t[c]
            checks += 1
            first = theta[start] if start > 0 else -1
            if _pair_encodes(sym, start - size[start] if start > 0 else 0, i, first, t, keys, ranks, news, v):
                theta[i], size[i] = t, i - start
                found = True
                break
        if not found:
            return -1 - i
    return checks


def suffix_trie(tokens: list[str | None], ids: dict[str, int], atoms: set[int], v: int) -> tuple[np.ndarray, ...]:
    """The reversed-token trie of :func:`extend` as arrays (keys sorted, children, token at a
    node or -1): every token spelled by single-character tokens, read right to left, and each
    byte-fallback token as a symbol of its own."""
    children: list[dict[int, int]] = [{}]
    at: list[int] = [-1]
    seqs = [([i], i) for i in atoms]
    for i, t in enumerate(tokens):
        if t and all(ch in ids for ch in t):
            seqs.append(([ids[ch] for ch in reversed(t)], i))
    for seq, tok in seqs:
        node = 0
        for s in seq:
            nxt = children[node].get(s)
            if nxt is None:
                nxt = children[node][s] = len(at)
                children.append({})
                at.append(-1)
            node = nxt
        if at[node] < 0 or tok == ids.get(tokens[tok] or "", tok):
            at[node] = tok
    keys = np.array([n * v + s for n, ch in enumerate(children) for s in ch], np.int64)
    child = np.array([c for ch in children for c in ch.values()], np.int64)
    order = np.argsort(keys, kind="stable")
    return keys[order], child[order], np.array(at, np.int64)


(_find, _push, _pop), _ = jit_all(_find, _push, _pop)
(merge_all,), CACHED = jit_all(_merge_all)
(_pair_encodes,), _ = jit_all(_pair_encodes)
(extend,), _ = jit_all(_extend)


def merge_table(merges: dict[tuple[int, int], tuple[int, int]], vocab_size: int) -> tuple[np.ndarray, ...]:
    """(keys, ranks, new ids) sorted by key, from ``HfBpe.merges`` (pair -> (rank, new id))."""
    pairs = np.array(list(merges), np.int64).reshape(-1, 2)
    values = np.array(list(merges.values()), np.int64).reshape(-1, 2)
    keys = pairs[:, 0] * vocab_size + pairs[:, 1]
    order = np.argsort(keys, kind="stable")
    return keys[order], values[order, 0].copy(), values[order, 1].copy()
