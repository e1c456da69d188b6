"""Stage A: a concatenation's minimal DFA built from the right, minimizing after every step.

Determinizing ``[a-z]{1,50}x[a-z]{1,50}`` in one go tracks every position the ``x`` may have
taken: the subset construction has about 4^(n/2) states (163,839 for n = 16) while the minimal
DFA has O(n^2) (169). Brzozowski's derivatives explain the gap: the residual of a concatenation
is a union of residuals of its suffixes, and only the minimal automata of those suffixes need
to exist. So a concatenation ``p1 p2 ... pk`` is built as R_k = DFA(pk), R_i = MIN(DET(p_i R_{i+1})),
and a bounded repetition x{m,n} in front of R as

    T_0 = R,  T_j = MIN(DET(R | x T_(j-1)))  for j <= n - m,  then  m times  T = MIN(DET(x T)),

every step a product of two minimal DFAs (at most |R| (|x| + |T|) subsets), so its size
follows the minimal DFA's, not the subset construction's. Used when the plain construction
passes its probe (``regex.compile_regex``); each step stops past the state limit.
"""

from __future__ import annotations

from typing import Callable

import pynini

Dfa = Callable[[pynini.Fst, str], pynini.Fst]  # (automaton, what it is) -> its minimal DFA, or LimitError


def concatenation(parts: list[pynini.Fst | tuple[pynini.Fst, int, int]], dfa: Dfa) -> pynini.Fst:
    """The minimal DFA of the concatenation of ``parts``, right to left. A part is an automaton,
    or (the minimal DFA of x, m, n) for a bounded repetition x{m,n} of a finite x."""
    r = pynini.accep("")
    for part in reversed(parts):
        if isinstance(part, tuple):
            r = repetition(*part, r, dfa)
        else:
            r = dfa(pynini.concat(part, r), "the byte automaton of a concatenation")
    return r


def repetition(x: pynini.Fst, m: int, n: int, rest: pynini.Fst, dfa: Dfa) -> pynini.Fst:
    """x{m,n} rest, as MIN(DET(...)) one copy of x at a time (see the module docstring)."""
    what = f"the byte automaton of a repetition {{{m},{n}}} and what follows it"
    t = rest
    for _ in range(n - m):
        t = dfa(pynini.union(rest, pynini.concat(x, t)), what)
    for _ in range(m):
        t = dfa(pynini.concat(x, t), what)
    return t
