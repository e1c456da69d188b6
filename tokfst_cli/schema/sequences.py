"""Objects and arrays as words over abstract symbols, then spelled out (Koo et al. 2024 Sec. 5.1).

The members of an object (a property and its value) and the items of an array are first
symbols: which may follow which, how many there are, which must appear, are all regular
constraints on words over a small alphabet, built and intersected with pynini there, where
they cost nothing. The minimal DFA of that word language is then spelled out: each symbol
becomes its member automaton (``pynini.replace``, an RTN expansion), preceded by the
separator unless it comes first. Arcs that read the same symbol into the same state share
one copy of the member, so a stable property order costs one copy per property.

Labels: symbol s is :data:`BASE` + 2s; from a state where something was already written it
becomes BASE + 2s + 1, the "separator, then member" variant.
"""

from __future__ import annotations

from collections.abc import Iterable

import pynini

from tokfst_cli.automata.fsts import linear
from tokfst_cli.schema.automata import Budget

BASE = 1000  # above the bytes (1..256) and the text markers
_ROOT = 999


def label(symbol: int) -> int:
    return BASE + 2 * symbol


def symbols(labels: Iterable[int]) -> pynini.Fst:
    """One abstract symbol among ``labels`` (the empty language if none)."""
    ls = list(labels)
    return pynini.union(*(linear([x]) for x in ls)) if ls else pynini.Fst()


def star(labels: Iterable[int]) -> pynini.Fst:
    ls = list(labels)
    return symbols(ls).closure() if ls else pynini.accep("")


def optional(f: pynini.Fst) -> pynini.Fst:
    return pynini.union(pynini.accep(""), f)


def count(labels: Iterable[int], lo: int, hi: int | None) -> pynini.Fst:
    """Words of ``lo`` to ``hi`` symbols among ``labels``."""
    return symbols(labels).closure(lo, hi if hi is not None else 0) if hi != 0 else pynini.accep("")


def counted(marked: list[int], unmarked: list[int], lo: int, hi: int | None) -> pynini.Fst:
    """Words over both lists with ``lo`` to ``hi`` symbols from ``marked``."""
    free = star(unmarked)
    one = pynini.concat(symbols(marked), free)
    if hi == 0:
        return free
    return pynini.concat(free, one.closure(lo, hi if hi is not None else 0))


def at_most_once(mark: list[int], others: list[int], exactly: bool = False) -> pynini.Fst:
    """Words where symbols of ``mark`` occur at most once in all (exactly once with ``exactly``)."""
    return counted(mark, others, 1 if exactly else 0, 1)


def both(a: pynini.Fst, b: pynini.Fst) -> pynini.Fst:
    """The intersection of two word languages (small automata)."""
    return pynini.intersect(a.arcsort("olabel"), b.arcsort("ilabel"))


def minus(a: pynini.Fst, b: pynini.Fst) -> pynini.Fst:
    """The words of ``a`` not in ``b`` (small automata; ``b`` deterministic)."""
    if b.num_states() == 0:
        return a
    return pynini.difference(a.arcsort("olabel"), pynini.determinize(b.rmepsilon()).minimize().arcsort("ilabel"))


def separated(budget: Budget, words: pynini.Fst, what: str) -> pynini.Fst | None:
    """The word DFA with each symbol after the first relabelled to its separator variant."""
    d = budget.dfa(words, what)
    if d is None:
        return None
    out = pynini.Fst()
    one = pynini.Weight.one(out.weight_type())
    zero = pynini.Weight.zero(d.weight_type())
    ids: dict[tuple[int, int], int] = {}
    todo = [(d.start(), 0)]
    ids[todo[0]] = out.add_state()
    out.set_start(0)
    while todo:
        q, started = todo.pop()
        src = ids[(q, started)]
        if d.final(q) != zero:
            out.set_final(src)
        for arc in d.arcs(q):
            nxt = (arc.nextstate, 1)
            if nxt not in ids:
                ids[nxt] = out.add_state()
                todo.append(nxt)
            lab = arc.ilabel + started
            out.add_arc(src, pynini.Arc(lab, lab, one, ids[nxt]))
    return out


def spell(budget: Budget, words: pynini.Fst, member, separator: pynini.Fst, open_: pynini.Fst,
          close: pynini.Fst, what: str) -> pynini.Fst | None:
    """``open_``, each symbol of ``words`` (from :func:`separated`) replaced by ``member(symbol)``, ``close``.

    ``member`` maps a symbol number to its automaton; the separator variant is the separator
    followed by the member. Arcs reading one label into one state share one copy.
    """
    root = pynini.Fst()
    root.add_states(words.num_states())
    one = pynini.Weight.one(root.weight_type())
    zero = pynini.Weight.zero(words.weight_type())
    mids: dict[tuple[int, int], int] = {}
    fsts: dict[int, pynini.Fst] = {}
    size = words.num_states()
    for q in words.states():
        if words.final(q) != zero:
            root.set_final(q)
        for arc in words.arcs(q):
            key = (arc.ilabel, arc.nextstate)
            if key not in mids:
                mids[key] = root.add_state()
                root.add_arc(mids[key], pynini.Arc(arc.ilabel, arc.ilabel, one, arc.nextstate))
                if arc.ilabel not in fsts:
                    m = member((arc.ilabel - BASE) // 2)
                    fsts[arc.ilabel] = pynini.concat(separator, m) if (arc.ilabel - BASE) % 2 else m
                size += fsts[arc.ilabel].num_states()
            root.add_arc(q, pynini.Arc(0, 0, one, mids[key]))
    budget.check(size, what)
    root.set_start(words.start())
    body = pynini.replace([(_ROOT, root)] + list(fsts.items()), epsilon_on_replace=True) if fsts else root
    return budget.dfa(pynini.concat(pynini.concat(open_, body), close), what)
