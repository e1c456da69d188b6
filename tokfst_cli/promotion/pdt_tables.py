"""Stage S for pushdown grammars: a PDT's arcs as the tables ``stack.PushdownDecoder`` walks
(Allauzen & Riley 2012 for the PDT's semantics), and what they tell without a stack.

* ``Tables``: per PDT state, its byte arcs (label -> next states), pushes and pops
  (parenthesis, next state), epsilons and finality.
* ``byte_classes``: per state and column of T's trie, a class of the column's byte (bytes that
  lead to the same states share one), so a set of configurations steps once per class.
* ``pop_columns``: per state, the columns that a state reached from it by pops (whatever the
  stack) may read: where a pop of an unknown frame cannot matter.
* ``exits``: per state, the fewest bytes to leave its rule (steering a walk to its end).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pynini

from tokfst_cli.grammar.pushdown import Pushdown


@dataclass(frozen=True)
class Tables:
    """A PDT's arcs by state: ``bytes`` (label -> next states), ``push`` and ``pop`` ((open
    parenthesis, next state)), ``eps`` (next states), ``final``."""

    bytes: list[dict[int, list[int]]]
    push: list[list[tuple[int, int]]]
    pop: list[list[tuple[int, int]]]
    eps: list[list[int]]
    final: list[bool]
    start: int


def tables(pdt: Pushdown) -> Tables:
    """The :class:`Tables` of ``pdt``'s FST (a close parenthesis named by its open one)."""
    f = pdt.fst
    zero = pynini.Weight.zero(f.weight_type())
    close_of = {c: o for o, c in pdt.parens.items()}
    n = f.num_states()
    out = Tables([{} for _ in range(n)], [[] for _ in range(n)], [[] for _ in range(n)], [[] for _ in range(n)],
                 [f.final(q) != zero for q in range(n)], f.start())
    for q in f.states():
        for arc in f.arcs(q):
            lab, to = arc.ilabel, arc.nextstate
            if lab == 0:
                out.eps[q].append(to)
            elif lab in pdt.parens:
                out.push[q].append((lab, to))
            elif lab in close_of:
                out.pop[q].append((close_of[lab], to))
            else:
                out.bytes[q].setdefault(lab, []).append(to)
    return out


def byte_classes(t: Tables, column_labels: list[int]) -> np.ndarray:
    """Per PDT state and column of T: the class of the column's byte, bytes leading to the same
    states sharing one (0: the state does not read it)."""
    col_of = {lab: c for c, lab in enumerate(column_labels)}
    out = np.zeros((len(t.bytes), max(len(col_of), 1)), np.int32)
    for q, arcs in enumerate(t.bytes):
        ids: dict[tuple[int, ...], int] = {}
        for lab, targets in arcs.items():
            if lab in col_of:
                out[q, col_of[lab]] = ids.setdefault(tuple(targets), len(ids) + 1)
    return out


def pop_columns(t: Tables, column_labels: list[int], nbits: int) -> np.ndarray:
    """Per PDT state, the columns of T (``nbits`` 64-bit words) that a state reached from it by
    pops (any parenthesis, then parentheses and epsilons, whatever the stack) may read: the bytes
    that can follow a pop of an unknown frame."""
    col_of = {lab: c for c, lab in enumerate(column_labels)}
    bits = np.zeros((len(t.bytes), nbits), np.uint64)
    for x in range(len(t.bytes)):
        seen = {to for _, to in t.pop[x]}
        todo = list(seen)
        while todo:
            s = todo.pop()
            for to in [*t.eps[s], *(to for _, to in t.push[s]), *(to for _, to in t.pop[s])]:
                if to not in seen:
                    seen.add(to)
                    todo.append(to)
        for s in seen:
            for lab in t.bytes[s]:
                if lab in col_of:
                    bits[x, col_of[lab] >> 6] |= np.uint64(1) << np.uint64(col_of[lab] & 63)
    return bits


def exits(t: Tables) -> tuple[list[int], dict[int, int]]:
    """Per PDT state, the fewest bytes to a state that may leave its rule (a close parenthesis,
    or the PDT's final state); a call on the way costs its callee's shortest text (Bellman-Ford
    over the states: every cost is positive). And each open parenthesis's return state."""
    n, inf = len(t.final), 1 << 40
    returns: dict[int, int] = {}
    for q in range(n):
        for paren, to in t.pop[q]:
            returns[paren] = to
    out = [0 if (t.pop[q] or t.final[q]) else inf for q in range(n)]
    changed = True
    while changed:
        changed = False
        for q in range(n):
            best = out[q]
            for targets in t.bytes[q].values():
                for to in targets:
                    best = min(best, 1 + out[to])
            for paren, to in t.push[q]:
                if paren in returns:
                    best = min(best, out[to] + out[returns[paren]])
            for to in t.eps[q]:
                best = min(best, out[to])
            if best < out[q]:
                out[q], changed = best, True
    return out, returns
