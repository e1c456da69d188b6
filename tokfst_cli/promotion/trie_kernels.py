"""The compiled kernels of ``lazy`` (numba, cached on disk like ``bitset_kernels``): A's byte DFA
run over T's trie (``trie.TokenTrie``) from one state of A.

T's trie is first flattened (``flatten``) into its *prefix nodes* in depth-first preorder: one
node per distinct proper or whole prefix of a token's surface, with the label column of its last
byte, its depth, the size of its subtree and the tokens whose surface it is. A walk from state
q (``reach_from``) is then one pass over those arrays in order, no stack: a node's state is
delta(state of its parent's depth, the class of its column); a node whose byte A cannot read is skipped with
its whole subtree (the next ``size`` nodes); the tokens of every other node are set in a packed
mask (bit ``t % 32`` of word ``t // 32``). Where the node's state reads every column under it
back into itself (a free string's body, a word's letters), the whole subtree's tokens, which
lie together in preorder, are set without walking it. ``token_paths`` gives each token's columns (for
``run``: the state of A after a token's surface from q, -1 where A cannot read it; ``run_many``
the same for many tokens). ``class_trie`` merges the prefix nodes by their sequence of A's
classes of bytes (the dead class pruned), in ``flatten``'s layout: ``reach_from`` walks it too.

Imported lazily by ``lazy``: importing numba loads LLVM (about 0.5 s)."""

from __future__ import annotations

import numpy as np

from tokfst_cli.automata.bitset_kernels import jit_all

SUBTREE = 8  # nodes under which a walk first tests whether A loops on every column of the subtree


def _flatten(root, lo, hi, column, token, nxt, nbits):  # pragma: no cover
    """(col, depth, size, tptr, toks, below) of the prefix nodes in preorder (arcs of each state
    sorted by column: a run of one column is one prefix node, its inner arc leads to the node's
    children); ``below``: per node, the columns of the nodes under it, ``nbits`` 64-bit words."""
    m = column.shape[0]
    col = np.empty(m, np.int32)
    depth = np.empty(m, np.int32)
    parent = np.empty(m, np.int64)
    owner = np.empty(m, np.int64)  # per token arc: its prefix node
    toks = np.empty(m, np.int32)
    nt = 0
    s_lo = np.empty(m + 1, np.int64)  # the stack: runs of arcs (one column), their depth and parent node
    s_hi = np.empty(m + 1, np.int64)
    s_d = np.empty(m + 1, np.int32)
    s_p = np.empty(m + 1, np.int64)
    top, n = 0, 0
    child, d, v = root, 0, -1  # the root's runs first, as if it were the child of a node at depth 0
    while True:
        if child >= 0:  # the child's runs, pushed last first: popped in column order
            a = hi[child]
            while a > lo[child]:
                b = a - 1
                while b > lo[child] and column[b - 1] == column[a - 1]:
                    b -= 1
                s_lo[top], s_hi[top], s_d[top], s_p[top] = b, a, d + 1, v
                top += 1
                a = b
        if top == 0:
            break
        top -= 1
        a0, a1, d, p = s_lo[top], s_hi[top], s_d[top], s_p[top]
        v = n
        n += 1
        col[v], depth[v], parent[v] = column[a0], d, p
        child = -1
        for a in range(a0, a1):
            if token[a] >= 0:
                owner[nt], toks[nt] = v, token[a]
                nt += 1
            else:
                child = nxt[a]
    size = np.ones(n, np.int32)
    below = np.zeros((n, nbits), np.uint64)
    for v in range(n - 1, -1, -1):
        p = parent[v]
        if p >= 0:
            size[p] += size[v]
            for w in range(nbits):
                below[p, w] |= below[v, w]
            below[p, col[v] >> 6] |= np.uint64(1) << np.uint64(col[v] & 63)
    tptr = np.zeros(n + 1, np.int32)
    for i in range(nt):
        tptr[owner[i] + 1] += 1
    for v in range(n):
        tptr[v + 1] += tptr[v]
    return col[:n].copy(), depth[:n].copy(), size, tptr, toks[:nt].copy(), below


def _reach_from(q, col, depth, size, tptr, toks, below, delta, cls, loops, words, at):  # pragma: no cover
    """Sets in ``words`` the tokens A reads from q (``delta``: A's table over the classes ``cls`` of
    T's columns); ``at`` (T's depth + 1) holds a state per depth. ``loops``: per state of A, the
    columns it reads back into itself; where they hold every column under a node (``below``),
    every token of its subtree is read (each byte keeps the state): they are set at once."""
    dead = delta.shape[0] - 1
    nbits = below.shape[1]
    at[0] = q
    n = col.shape[0]
    v = 0
    count = 0
    while v < n:
        d = depth[v]
        s = delta[at[d - 1], cls[col[v]]]
        if s == dead:
            v += size[v]
            continue
        at[d] = s
        end = v + 1
        if size[v] >= SUBTREE:
            inside = True
            for w in range(nbits):
                if below[v, w] & ~loops[s, w]:
                    inside = False
                    break
            if inside:
                end = v + size[v]
        for i in range(tptr[v], tptr[end]):
            t = toks[i]
            words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            count += 1
        v = end
    return count


def _token_paths(col, depth, tptr, toks, vocab, ptr):  # pragma: no cover
    """Fills ``ptr`` (vocab + 1, zeros) with the offsets of each token's columns; returns the columns."""
    n = col.shape[0]
    for v in range(n):
        for i in range(tptr[v], tptr[v + 1]):
            if toks[i] < vocab:
                ptr[toks[i] + 1] = depth[v]
    for t in range(vocab):
        ptr[t + 1] += ptr[t]
    cols = np.empty(ptr[vocab], np.int32)
    path = np.empty(int(depth.max()) + 1 if n else 1, np.int32)
    for v in range(n):
        path[depth[v]] = col[v]
        for i in range(tptr[v], tptr[v + 1]):
            t = toks[i]
            if t < vocab:
                cols[ptr[t]:ptr[t + 1]] = path[1:depth[v] + 1]
    return cols


def _run(q, t, ptr, cols, delta, cls):  # pragma: no cover
    dead = delta.shape[0] - 1
    a, b = ptr[t], ptr[t + 1]
    if a == b:
        return -1
    s = q
    for i in range(a, b):
        s = delta[s, cls[cols[i]]]
        if s == dead:
            return -1
    return s


def _run_many(q, tokens, ptr, cols, delta, cls, out):  # pragma: no cover
    for i in range(len(tokens)):
        out[i] = run(q, tokens[i], ptr, cols, delta, cls)  # the compiled ``run`` below
    return out


def _class_trie(col, depth, size, tptr, toks, cls, nclasses):  # pragma: no cover
    """The trie of T's prefix nodes merged by their sequence of A's classes (``cls`` per column;
    class 0, dead from every state, pruned with its subtrees; at most 64 classes), in preorder:
    (class, depth, size, tptr, toks, below) per class node, ``below`` the bits of the classes
    under it (one word): the layout of ``flatten``, its columns being classes, so ``reach_from``
    walks it with the identity as ``cls``. A class node
    holds the prefix nodes (a group) whose class sequences are its own: its children group their
    children by class (counting sort), and its tokens are theirs."""
    n = col.shape[0]
    live, nlive = 0, 0  # the prefix nodes under no dead class, and their tokens: the sizes below
    v = 0
    while v < n:
        if cls[col[v]] == 0:
            v += size[v]
        else:
            live += 1
            nlive += tptr[v + 1] - tptr[v]
            v += 1
    members = np.empty(live + 1, np.int64)  # each group's prefix nodes, a slice; groups are written once
    s_lo = np.empty(live + 1, np.int64)  # the stack of pending groups: slice, class, depth, parent
    s_hi = np.empty(live + 1, np.int64)
    s_c = np.empty(live + 1, np.int32)
    s_d = np.empty(live + 1, np.int32)
    s_p = np.empty(live + 1, np.int64)
    kcls = np.empty(live, np.int32)
    kdepth = np.empty(live, np.int32)
    kparent = np.empty(live, np.int64)
    ktptr = np.zeros(live + 1, np.int32)
    ktoks = np.empty(nlive, np.int32)
    count = np.zeros(nclasses, np.int64)
    start = np.zeros(nclasses, np.int64)
    members[0] = -1  # the root's group: the virtual node above the depth-1 prefix nodes (no class)
    s_lo[0], s_hi[0], s_c[0], s_d[0], s_p[0] = 0, 1, 0, 0, -1
    written, top, k, nt = 1, 1, 0, 0
    while top > 0:
        top -= 1
        lo, hi, c, d, p = s_lo[top], s_hi[top], s_c[top], s_d[top], s_p[top]
        me = -1
        if c > 0:
            me = k
            kcls[k], kdepth[k], kparent[k] = c, d, p
            for i in range(lo, hi):
                v = members[i]
                for j in range(tptr[v], tptr[v + 1]):
                    ktoks[nt] = toks[j]
                    nt += 1
            ktptr[k + 1] = nt
            k += 1
        for cc in range(nclasses):
            count[cc] = 0
        for i in range(lo, hi):  # the members' children, counted by class
            v = members[i]
            w, end = v + 1, (v + size[v] if v >= 0 else n)
            while w < end:
                count[cls[col[w]]] += 1
                w += size[w]
        for cc in range(nclasses):
            start[cc] = written
            written += count[cc] if cc > 0 else 0
            count[cc] = 0
        for i in range(lo, hi):
            v = members[i]
            w, end = v + 1, (v + size[v] if v >= 0 else n)
            while w < end:
                cc = cls[col[w]]
                if cc > 0:
                    members[start[cc] + count[cc]] = w
                    count[cc] += 1
                w += size[w]
        for cc in range(nclasses - 1, 0, -1):
            if count[cc] > 0:
                s_lo[top], s_hi[top], s_c[top], s_d[top], s_p[top] = start[cc], start[cc] + count[cc], cc, d + 1, me
                top += 1
    ksize = np.ones(k, np.int32)
    kbelow = np.zeros((k, 1), np.uint64)
    for v in range(k - 1, -1, -1):
        p = kparent[v]
        if p >= 0:
            ksize[p] += ksize[v]
            kbelow[p, 0] |= kbelow[v, 0] | (np.uint64(1) << np.uint64(kcls[v]))
    return kcls[:k].copy(), kdepth[:k].copy(), ksize, ktptr[:k + 1].copy(), ktoks[:nt].copy(), kbelow


(flatten, reach_from, token_paths, run, class_trie), CACHED = jit_all(
    _flatten, _reach_from, _token_paths, _run, _class_trie)
(run_many,), _ = jit_all(_run_many)  # calls ``run``, compiled above
