"""The fewest canonical tokens from each member of the factorized BPE product to a final state (``max_tokens``).

Seed 001 App. B's Gamma^k on the factorized product, without the product: the co-reachability
fixpoint of ``liveness.compute`` run by layers (breadth first), so a member's layer is its
distance. ``counted.CountedFactorized`` walks C(S) within N tokens with these distances.
"""

from __future__ import annotations

import numpy as np

from tokfst_cli.bpe.live_table import Arcs, Liveness, successor_values
from tokfst_cli.bpe.word import Word


def layers(word: Word, arcs: Arcs, units: list, preds: list, boundary: list, gkeys: np.ndarray, row_of: dict,
            spec_ids: dict, n_cls: int, limit: int, finals: np.ndarray, generic_row, special_bit) -> Liveness:
    """Fewest tokens to a final state per member (``max_tokens``; Pitfalls 2025 App. B's Gamma^k on
    the factorized product): layer k holds the members with a canonical completion of at most k
    tokens. A token leads into layer k - 1; a pre-token boundary costs no token, so its word
    start counts in the same layer (re-evaluated there until nothing changes). Layer k only
    re-evaluates the predecessors of what changed in layer k - 1; layers stop at ``limit`` or
    when one adds nothing."""
    n_fb, nodes = len(word.imp.fb_final), word.nodes
    dtype = np.uint8 if limit < 0xFF else np.uint16 if limit < 0xFFFF else np.uint32
    far = np.iinfo(dtype).max
    dist = np.full((len(gkeys), n_cls + 1), far, dtype)
    sdist: dict[int, int] = {k: far for k in spec_ids}
    bpreds: list[list[int]] = [[] for _ in units]
    for u, b in enumerate(boundary):
        if b >= 0:
            bpreds[b].append(u)
    todo = list(range(len(units)))
    k = 0
    while todo and k <= limit:
        def succ_ok(nexts, cs, fs, ns, k=k) -> np.ndarray:  # a successor within k - 1 tokens
            return successor_values(dist, far, gkeys, n_fb, nexts, cs, fs, ns,
                                    lambda q, f, n: sdist.get((q * n_fb + f) * nodes + n, far)) < k

        def end_ok(p: int, after: int, k=k) -> bool:  # final, or a boundary into a word start within k
            return bool(finals[p]) or (after >= 0 and sdist.get(after * n_fb * nodes, far) <= k)

        queued = set(todo)
        nxt: set[int] = set()
        while todo:
            u = todo.pop()
            queued.discard(u)
            kind, key = units[u]
            if kind == "g":
                row = dist[row_of[key]]
                newly = generic_row(key, succ_ok, end_ok) & (row == far)
                row[newly] = k
                changed = bool(newly.any())
            else:
                changed = sdist[key] == far and special_bit(key, succ_ok, end_ok)
                if changed:
                    sdist[key] = k
            if changed:
                nxt.update(preds[u])
                for v in bpreds[u]:
                    if v not in queued:
                        queued.add(v)
                        todo.append(v)
        todo = sorted(nxt, reverse=True)
        k += 1
    skeys = np.array(sorted(sdist), np.int64)
    sd = np.array([sdist[key] for key in skeys.tolist()], dtype)
    return Liveness(word, arcs, gkeys, dist != far, skeys, sd != far, dist, sd)
