"""Generic graph helpers over arc arrays: distinct edges, trimming, state subsets and distances.

Shared by the filters (Pitfalls 2025 Sec. 4), stage S and the decoders; they know nothing of tokens."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from tokfst_cli.automata.arrays import FstArrays, unique

DENSE = 1 << 22  # up to this many state pairs, distinct edges are marked in a bool matrix (no sort)


def distinct_edges(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (src, dst) pairs, sorted."""
    if n * n <= DENSE:
        seen = np.zeros(n * n, bool)
        seen[src * n + dst] = True
        pairs = np.flatnonzero(seen)
    else:
        pairs = unique(src * n + dst)
    return pairs // n, pairs % n


TRIM_EDGES = 1 << 16  # up to this many distinct state-to-state edges, :func:`trim_mask` searches in Python


def trim_mask(a: FstArrays, bounded: bool = True) -> np.ndarray | None:
    """The accessible and coaccessible states of :func:`trimmed_arrays` (None past TRIM_EDGES
    distinct edges; ``bounded`` False: no bound, the caller has no OpenFst automaton to connect)."""
    n = len(a.final)
    if n == 0 or a.start < 0:
        return np.zeros(n, bool)
    s, d = distinct_edges(np.asarray(a.src, np.int64), np.asarray(a.nextstate, np.int64), n)
    if bounded and len(s) > TRIM_EDGES:
        return None
    return _reached(n, s, d, [a.start]) & _reached(n, d, s, np.flatnonzero(a.final).tolist())


def kept_states(a: FstArrays, keep: np.ndarray) -> FstArrays:
    """The automaton on the states ``keep`` (renumbered in order) and the arcs between them."""
    if keep.all():
        return a
    if not len(keep) or not keep[a.start]:
        none = np.zeros(0, np.int64)
        return FstArrays(-1, np.zeros(0, bool), none, none, none, none)
    new = np.cumsum(keep) - 1
    arc = keep[a.src] & keep[a.nextstate]
    return FstArrays(int(new[a.start]), a.final[keep], new[a.src[arc]], a.ilabel[arc], a.olabel[arc],
                     new[a.nextstate[arc]])


def _reached(n: int, src: np.ndarray, dst: np.ndarray, seeds: list[int]) -> np.ndarray:
    """The states reached from ``seeds`` over the edges src -> dst (depth first)."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for p, q in zip(src.tolist(), dst.tolist()):
        succ[p].append(q)
    seen = [False] * n
    for q in seeds:
        seen[q] = True
    todo = list(seeds)
    while todo:
        for q in succ[todo.pop()]:
            if not seen[q]:
                seen[q] = True
                todo.append(q)
    return np.array(seen, bool)


UNREACHED = 1 << 30  # backward()'s distance of a state without a final state after it


def backward(back: list[list[int]], finals: np.ndarray, far: int = UNREACHED) -> np.ndarray:
    """Breadth-first distance to a final state over reversed edges (``back[q]``: the states with
    an edge to q; unreachable: ``far``). Python lists in the loop: no numpy call per state."""
    dist = [far] * len(back)
    queue = deque(np.flatnonzero(finals).tolist())
    for q in queue:
        dist[q] = 0
    while queue:
        q = queue.popleft()
        d = dist[q] + 1
        for p in back[q]:
            if dist[p] > d:
                dist[p] = d
                queue.append(p)
    return np.array(dist, np.int64)


def strongly_connected(succ: Mapping[str, Sequence[str]], roots: Iterable[str]) -> list[list[str]]:
    """The strongly connected components of the nodes reached from ``roots``, each in the order its
    nodes were first reached, every component after the ones it reaches (Tarjan's algorithm,
    iterative: a grammar or a package may chain thousands of nodes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in roots:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on.add(v)
            nexts = succ.get(v, ())
            if i < len(nexts):
                work.append((v, i + 1))
                w = nexts[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp[::-1])
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out
