"""S ∩ F over arc arrays for a token filter F with few states (Pitfalls 2025 Sec. 4.5's ``fuse_spaces``).

OpenFst's ``intersect`` then ``minimize`` then a second read of the arcs for the decoder cost
three passes over S's arcs; S ∩ F is made here with numpy from S's arc arrays instead, for an
F of at most :data:`MAX_STATES` states or whose states reached on S's labels are that few
(:func:`table` with ``used``: ``no_byte_tokens`` on Llama-2's S_M), and its minimality is
decided without minimizing, for an agnostic S (every tokenization of each text) and an F that
*keeps texts* (from F's start state every text has an allowed spelling: ``fuse_spaces`` fuses
[ ][t] into [ t], ``no_byte_tokens`` spells characters with their literal tokens):

* The pairs (q, f) that can be entered are S's states with F's start, and (q', F(f, l)) for
  every arc q -l-> q' of S and state f of F. A pair (q, f) whose arcs all lead where (q, start)'s
  lead (same F state after each of q's labels) is the same state as (q, start) and merged into
  it. Then the product is trimmed (``tokens.trimmed_arrays``).
* Minimal where proven: the states (q, start) have the text languages of S's states
  q, which are distinct in a minimal agnostic S, so no two of them are equivalent. Equivalent
  states of a trim DFA have the same finality and the same labels out; so if no state (q, f),
  f not the start, shares both with another state (compared by a 64-bit hash of the label set:
  a collision only costs a minimization), the product is minimal. Else the caller minimizes.
"""

from __future__ import annotations

import numpy as np
import pynini

from tokfst_cli.automata.arrays import FstArrays, fst_arrays, unique
from tokfst_cli.automata.graph import kept_states, trim_mask

MAX_STATES = 8  # filters with more states go to OpenFst's intersect (one pass over S's arcs per state here)
_WEIGHTS = np.random.default_rng(0x7F4A7C15).integers(1, 1 << 63, 1 << 16, dtype=np.uint64)  # per label, grown


def table(f: pynini.Fst | FstArrays, labels: int, used: np.ndarray | None = None) -> np.ndarray | None:
    """F's transitions as a (states, labels) int32 table, start state first, -1 for no arc; None
    past :data:`MAX_STATES` states or with a state that is not final. ``used``: only the labels
    S uses (sorted), and only the states F reaches from its start on them: S ∩ F is S ∩ F'
    for that F', which has a few states where F has many (``no_byte_tokens``: the partial
    characters S can spell, e.g. Llama-2's leading ▁ in three bytes)."""
    a = fst_arrays(f) if isinstance(f, pynini.Fst) else f
    if len(a.final) == 0 or not a.final.all():
        return None
    offsets = np.searchsorted(a.src, np.arange(len(a.final) + 1))  # arcs come grouped by state, sorted by label
    new = {int(a.start): 0}  # F's state -> the table's, in breadth-first order from the start
    rows = []
    while len(rows) < len(new):  # over the states F reaches on the labels (few: MAX_STATES)
        p = list(new)[len(rows)]
        lab, dst = a.ilabel[offsets[p]:offsets[p + 1]], a.nextstate[offsets[p]:offsets[p + 1]]
        if used is not None and len(lab):  # the arcs on S's labels: a binary search per label S uses
            at = np.minimum(np.searchsorted(lab, used), len(lab) - 1)
            hit = lab[at] == used
            lab, dst = used[hit], dst[at[hit]]
        rows.append((lab, dst))
        for q in set(dst.tolist()):
            if q not in new:
                if len(new) == MAX_STATES:
                    return None
                new[q] = len(new)
    renumber = np.full(len(a.final), -1, np.int64)
    renumber[list(new)] = list(new.values())
    out = np.full((len(new), labels), -1, np.int32)
    for j, (lab, dst) in enumerate(rows):
        out[j, lab] = renumber[dst]
    out.setflags(write=False)
    return out


def intersect(a: FstArrays, delta: np.ndarray) -> tuple[FstArrays, np.ndarray] | None:
    """S ∩ F (trimmed, states renumbered in order) and the F state of each of its states; ``a``:
    S's arcs (grouped by state), ``delta``: :func:`table` of F (state 0 = start, every state
    final). None past ``graph.TRIM_EDGES`` (the caller intersects with OpenFst)."""
    n, k = len(a.final), delta.shape[0]
    src, lab, dst = (np.asarray(x, np.int64) for x in (a.src, a.ilabel, a.nextstate))
    degree = np.bincount(src, minlength=n)
    first = np.cumsum(degree) - degree
    to = delta[:, lab]  # (F state, arc of S) -> F's next state
    f_, arc_ = np.nonzero(to > 0)
    cand = unique(to[f_, arc_].astype(np.int64) * n + dst[arc_])  # the pairs (g > 0, q) some arc enters
    cg, cq = cand // n, cand % n
    deg = degree[cq]
    arcs = np.repeat(first[cq], deg) + _ranks(deg)
    owner = np.repeat(np.arange(len(cand)), deg)
    differs = np.bincount(owner, delta[cg[owner], lab[arcs]] != delta[0, lab[arcs]], len(cand)) > 0
    pair = np.full((k, n), -1, np.int64)  # (F state, S state) -> state of the product
    pair[0] = np.arange(n)
    pair[cg, cq] = cq  # merged into (q, start): the same arcs to the same states
    own_g, own_q = cg[differs], cq[differs]
    pair[own_g, own_q] = n + np.arange(len(own_q))
    count = n + len(own_q)
    pq, pf = np.r_[np.arange(n, dtype=np.int64), own_q], np.r_[np.zeros(n, np.int64), own_g]
    deg = degree[pq]
    arc = np.repeat(first[pq], deg) + _ranks(deg)
    owner = np.repeat(np.arange(count), deg)
    to = delta[np.repeat(pf, deg), lab[arc]]
    ok = to >= 0
    owner, arc, to = owner[ok], arc[ok], to[ok]
    out = FstArrays(int(a.start), np.asarray(a.final, bool)[pq], owner, lab[arc], lab[arc], pair[to, dst[arc]])
    keep = trim_mask(out)
    if keep is None:
        return None
    return kept_states(out, keep), pf[keep]


def _ranks(counts: np.ndarray) -> np.ndarray:
    """0..c-1 for each count c, concatenated."""
    return np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def minimal(a: FstArrays, fstate: np.ndarray) -> bool:
    """Proven minimal by the module docstring's test (False: not proven; the caller minimizes)."""
    n = len(a.final)
    extra = np.flatnonzero(fstate != 0)
    if not len(extra):
        return True
    weight = _weights(int(a.ilabel.max()) + 1)
    sig = np.zeros(n, np.uint64)
    has = np.flatnonzero(np.bincount(a.src, minlength=n))
    if len(has):  # arcs come grouped by state: one sum per state (mod 2^64)
        starts = np.searchsorted(a.src, has)
        sig[has] = np.add.reduceat(weight[a.ilabel], starts)
    sig = sig * np.uint64(2) + np.asarray(a.final, np.uint64)
    values, counts = np.unique(sig, return_counts=True)
    return not np.isin(sig[extra], values[counts > 1]).any()


def _weights(size: int) -> np.ndarray:
    """A random 64-bit weight per label, the same for the whole process."""
    global _WEIGHTS
    if len(_WEIGHTS) < size:
        more = np.random.default_rng(len(_WEIGHTS)).integers(1, 1 << 63, size - len(_WEIGHTS), dtype=np.uint64)
        _WEIGHTS = np.r_[_WEIGHTS, more]
    return _WEIGHTS
