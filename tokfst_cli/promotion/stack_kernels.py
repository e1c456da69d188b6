"""The compiled kernel of ``stack`` (numba, cached on disk like ``trie_kernels``): the masks of a
pushdown decoder over T's trie in ``trie_kernels.flatten``'s layout.

The decoder numbers the configuration sets it meets and keeps a table ``delta[set, column]``
filled on demand: -2 not computed yet, -1 no configuration reads the byte. ``walk`` passes over
the prefix nodes in preorder from one set per subtree given, as ``trie_kernels.reach_from`` does;
where the table has no entry yet it records the node and skips its subtree (the decoder fills
the set's row in Python and walks those subtrees again); where a set has a pop waiting on the
unknown frame (``marked``) it records the node and goes on; a token is allowed where its set
has a configuration that reads on or accepts (``alive``). Once the sets a walk meets are known,
it is one pass here."""

from __future__ import annotations

import numpy as np

from tokfst_cli.automata.bitset_kernels import jit_all


def _walk(lo, hi, sets, nstarts, col, depth, size, tptr, toks, below, delta, marked, alive, after, words, at,
          todo_node, todo_set, cut_node, cut_set):  # pragma: no cover - compiled
    """Sets in ``words`` the tokens read under the nodes lo[i]..hi[i] (one subtree, or the whole
    trie) from set ``sets[i]`` (the set at their parent), for i < nstarts; returns (nodes to
    compute, nodes where a pop waits) recorded in the buffers with their sets (the parent's, the
    node's). A waiting pop is recorded only where it may matter: the set does not live on, or some
    column under the node is one that a state reached by pops may read (``after``)."""
    ntodo, ncut = 0, 0
    nbits = below.shape[1]
    for i in range(nstarts):
        v, end = lo[i], hi[i]
        at[depth[v] - 1] = sets[i]
        while v < end:
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
                needed = not alive[s]
                for w in range(nbits):
                    if below[v, w] & after[s, w]:
                        needed = True
                        break
                if needed:
                    cut_node[ncut], cut_set[ncut] = v, s
                    ncut += 1
            at[d] = s
            if alive[s]:
                for j in range(tptr[v], tptr[v + 1]):
                    t = toks[j]
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
