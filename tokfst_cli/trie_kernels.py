"""The compiled kernels of ``lazy`` (numba, cached on disk like ``bitset_kernels``): A's byte DFA
run over T's trie (``trie.TokenTrie``) from one state of A, depth first.

- ``reach_from``: every token whose surface A reads from state q, as set bits of a packed mask
  (bit ``t % 32`` of word ``t // 32``); a pair (trie node, state of A) whose byte A cannot read
  is cut with its subtree, so the work is the live part of the trie;
- ``preorder``: T's inner states in depth-first preorder, so that a walk over a live subtree
  reads the arrays in order;
- ``token_paths``: each token's surface as T's label columns, root to leaf (CSR by token id);
- ``run``: the state of A after a token's surface from q (-1: A cannot read it).

Imported lazily by ``lazy``: importing numba loads LLVM (about 0.5 s)."""

from __future__ import annotations

import numpy as np

from .bitset_kernels import jit_all


def _reach_from(q, root, lo, hi, column, token, nxt, delta, words, stack_node, stack_state):  # pragma: no cover
    dead = delta.shape[0] - 1
    stack_node[0] = root
    stack_state[0] = q
    top = 1
    count = 0
    while top > 0:
        top -= 1
        u = stack_node[top]
        s = stack_state[top]
        for a in range(lo[u], hi[u]):
            s2 = delta[s, column[a]]
            if s2 == dead:
                continue
            t = token[a]
            if t >= 0:  # a token's last byte (T returns to its root)
                words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
                count += 1
            else:  # each node of the trie is entered at most once per walk: the stack holds them all
                stack_node[top] = nxt[a]
                stack_state[top] = s2
                top += 1
    return count


def _preorder(root, lo, hi, column, token, nxt):  # pragma: no cover
    """T's inner states in depth-first preorder, and per state its parent, the column of the arc
    from it and its depth."""
    n = lo.shape[0]
    order = np.empty(n, np.int64)
    parent = np.full(n, -1, np.int64)
    parent_col = np.full(n, -1, np.int64)
    depth = np.zeros(n, np.int64)
    pos = 0
    stack = np.empty(n, np.int64)
    stack[0] = root
    top = 1
    while top > 0:
        top -= 1
        u = stack[top]
        order[pos] = u
        pos += 1
        for a in range(hi[u] - 1, lo[u] - 1, -1):  # children pushed last first: visited in arc order
            if token[a] < 0:
                v = nxt[a]
                parent[v], parent_col[v], depth[v] = u, column[a], depth[u] + 1
                stack[top] = v
                top += 1
    return order[:pos], parent, parent_col, depth


def _token_paths(root, lo, hi, column, token, parent, parent_col, depth, vocab, ptr):  # pragma: no cover
    """Fills ``ptr`` (vocab + 1, zeros) with the offsets of each token's columns (``_preorder``'s
    parents and depths); returns the columns."""
    for u in range(lo.shape[0]):
        for a in range(lo[u], hi[u]):
            t = token[a]
            if 0 <= t < vocab:
                ptr[t + 1] = depth[u] + 1
    for t in range(vocab):
        ptr[t + 1] += ptr[t]
    cols = np.empty(ptr[vocab], np.int64)
    for u in range(lo.shape[0]):
        for a in range(lo[u], hi[u]):
            t = token[a]
            if not 0 <= t < vocab:
                continue
            i = ptr[t + 1] - 1
            cols[i] = column[a]
            v = u
            while v != root:
                i -= 1
                cols[i] = parent_col[v]
                v = parent[v]
    return cols


def _run(q, t, ptr, cols, delta):  # pragma: no cover
    dead = delta.shape[0] - 1
    a, b = ptr[t], ptr[t + 1]
    if a == b:
        return -1
    s = q
    for i in range(a, b):
        s = delta[s, cols[i]]
        if s == dead:
            return -1
    return s


(reach_from, preorder, token_paths, run), CACHED = jit_all(_reach_from, _preorder, _token_paths, _run)
