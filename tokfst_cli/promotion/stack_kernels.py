"""The compiled kernel of ``stack`` (numba, cached on disk like ``trie_kernels``): the masks of a
pushdown decoder over T's trie in ``trie_kernels.flatten``'s layout.

The decoder numbers the configuration sets it meets and keeps a table ``delta[set, column]``
filled on demand: -2 not computed yet, -1 no configuration reads the byte. ``walk`` passes over
the prefix nodes in preorder from one set, as ``trie_kernels.reach_from`` does, and where the
table has no entry yet (or the set would pop below a cut stack: ``marked``) it records the node
and skips its subtree; the decoder computes those steps in Python and walks those subtrees
again. Once the sets a state leads to are known, a mask is one pass here."""

from __future__ import annotations

import numpy as np

from tokfst_cli.automata.bitset_kernels import jit_all


def _walk(q, lo, hi, col, depth, size, tptr, toks, delta, marked, words, at, todo_node, todo_set,
          cut_node, cut_set):  # pragma: no cover - compiled
    """Sets in ``words`` the tokens read from set ``q`` under the nodes lo..hi (one subtree, or
    the whole trie); returns (nodes to compute, nodes below a cut) recorded in the buffers."""
    at[depth[lo] - 1] = q
    v, ntodo, ncut = lo, 0, 0
    while v < hi:
        d = depth[v]
        p = at[d - 1]
        s = delta[p, col[v]]
        if s == -2:
            todo_node[ntodo], todo_set[ntodo] = v, p
            ntodo += 1
            v += size[v]
            continue
        if s < 0:
            v += size[v]
            continue
        if marked[s]:
            cut_node[ncut], cut_set[ncut] = v, p
            ncut += 1
            v += size[v]
            continue
        at[d] = s
        for i in range(tptr[v], tptr[v + 1]):
            t = toks[i]
            words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        v += 1
    return ntodo, ncut


def _parents(depth):  # pragma: no cover - compiled
    """Each prefix node's parent (-1: a child of the root), from the preorder depths."""
    n = depth.shape[0]
    parent = np.empty(n, np.int64)
    last = np.full(int(depth.max()) + 2 if n else 2, -1, np.int64)
    for v in range(n):
        parent[v] = last[depth[v] - 1]
        last[depth[v]] = v
    return parent


(walk, parents), CACHED = jit_all(_walk, _parents)
