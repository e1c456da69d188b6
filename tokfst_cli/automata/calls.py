"""Call labels: the nonterminals of a recursive transition network over bytes (Koo et al. 2024
Sec. 3.2; Allauzen & Riley 2012).

A rule that needs a stack is an acceptor over bytes (labels 1-256) and call labels, one arc per
reference to another such rule; ``pynini.pdt_replace`` (:mod:`tokfst_cli.grammar.pushdown`) turns
each call into a pair of parentheses. Grammars and recursive JSON Schemas share these labels.
"""

from __future__ import annotations

import pynini

CALL = 1 << 20  # the call label of RTN rule i is CALL + i (bytes are 1..256)
PAREN = 1 << 21  # pdt_replace numbers its parentheses from here


def call_label(index: int) -> int:
    return CALL + index


def has_calls(f: pynini.Fst) -> bool:
    """Whether an acceptor reads a call label."""
    return any(CALL <= arc.ilabel < PAREN for q in f.states() for arc in f.arcs(q))
