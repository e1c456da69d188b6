"""Stage P for BPE, steps 2-3: leftmost-first match ends and the marked language of a cut (Pitfalls 2025 Sec. 3.1).

Leftmost-first (Perl) match ends without backtracking, as RE2 computes them: a match's threads
form an ordered list (priority order, first occurrence kept); when a thread reaches MATCH the
lower-priority threads after it are cut and the end is recorded; the threads before it may still
find a longer, higher-priority match; the last recorded end wins (:class:`Threads`).

A text with a typed marker before each piece (match ``<m``, gap ``<g``) is ``find_iter``'s cut
iff: no two gaps are adjacent; every match piece ends where its ordered list records its final
end (the list survives to the end of the piece, records a match there, and the higher-priority
threads left then never match later); and no match starts at a gap position. The "never match"
conditions are one set of pending NFA threads (one reaching MATCH rejects), so one deterministic
automaton reads the marked texts (:class:`MarkedDfa`, Pitfalls 2025 Sec. 3.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import pynini

from tokfst_cli.automata.arrays import fst_from_arrays
from tokfst_cli.automata.fsts import linear, ranges_acceptor
from tokfst_cli.errors import LimitError
from tokfst_cli.pretok import charclass
from tokfst_cli.pretok.pattern import ASSERT, CHAR, EOT, MATCH, SPLIT, Nfa, _refuse, compile_pattern


class Threads:
    """The NFA over class ids: ordered closures, assertion resolution and steps (RE2's leftmost-first)."""

    def __init__(self, nfa: Nfa):
        self.nfa = nfa
        self.classes, self.set_classes = charclass.partition(nfa.sets)
        self.alphabet = [c for c, r in enumerate(self.classes) if r]
        self._closure: dict[int, tuple[int, ...]] = {}
        self.start = self.closure((nfa.start,))

    def closure(self, nodes) -> tuple[int, ...]:
        """Leaves (CHAR, ASSERT, MATCH) reachable through SPLITs, in priority order, first kept."""
        out: list[int] = []
        seen: set[int] = set()
        stack = list(reversed(list(nodes)))
        kind, targets = self.nfa.kind, self.nfa.out
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if kind[n] == SPLIT:
                stack.extend(reversed(targets[n]))
            else:
                out.append(n)
        return tuple(out)

    def resolve(self, items, c) -> tuple[int, ...]:
        """Assertions decided by the next character ``c`` (class id, or EOT), order kept."""
        out: list[int] = []
        seen: set[int] = set()
        todo = list(items)
        i = 0
        while i < len(todo):
            n = todo[i]
            i += 1
            if self.nfa.kind[n] == ASSERT:
                sid, negate = self.nfa.arg[n]
                ok = (c is not EOT and c in self.set_classes[sid]) != negate
                if ok:
                    todo[i:i] = list(self.closure(self.nfa.out[n]))
                continue
            if n not in seen:
                seen.add(n)
                out.append(n)
        return tuple(out)

    def step(self, items, c: int) -> tuple[int, ...]:
        """Threads after reading class ``c`` (assertions already resolved)."""
        nxt: list[int] = []
        for n in items:
            if self.nfa.kind[n] == CHAR and c in self.set_classes[self.nfa.arg[n]]:
                nxt.extend(self.nfa.out[n])
        return self.closure(nxt)

    def matches(self, items) -> bool:
        return any(self.nfa.kind[n] == MATCH for n in items)

    def before_match(self, items) -> tuple[int, ...] | None:
        """The threads of higher priority than the first MATCH, or None without a MATCH."""
        for i, n in enumerate(items):
            if self.nfa.kind[n] == MATCH:
                return items[:i]
        return None


START, GAP, IN_MATCH = 0, 1, 2


@dataclass(frozen=True)
class _State:
    kind: int
    fresh: bool
    cur: tuple[int, ...] | None  # the ordered threads of the current match piece
    closing: tuple[int, ...] | None  # the previous match's threads, decided by the next character
    pend: frozenset[int]  # threads that must never reach MATCH


class MarkedDfa:
    """Deterministic acceptor of find_iter's cuts, over class ids and the markers <m, <g."""

    def __init__(self, nfa: Nfa, max_states: int = 200_000):
        self.t = t = Threads(nfa)
        for c in [*t.alphabet, EOT]:
            if t.matches(t.resolve(t.start, c)):
                raise _refuse(nfa.pattern, "a match of the empty string")
        self.m_marker, self.g_marker = len(t.classes), len(t.classes) + 1
        init = _State(START, True, None, None, frozenset())
        self.states = [init]
        self.ids = {init: 0}
        self.arcs: list[tuple[int, int, int]] = []
        self.final: list[bool] = []
        i = 0
        while i < len(self.states):
            s = self.states[i]
            self.final.append(self._final(s))
            for label, nxt in self._moves(s):
                j = self.ids.get(nxt)
                if j is None:
                    if len(self.states) >= max_states:
                        raise LimitError(f"the split automaton of {nfa.pattern!r}", "max_states", max_states)
                    j = self.ids[nxt] = len(self.states)
                    self.states.append(nxt)
                self.arcs.append((i, label, j))
            i += 1

    def _moves(self, s: _State):
        t = self.t
        if s.kind == START or not s.fresh:
            closing = s.cur if s.kind == IN_MATCH else None
            if s.kind != GAP:
                yield self.g_marker, _State(GAP, True, None, closing, s.pend)
            yield self.m_marker, _State(IN_MATCH, True, t.start, closing, s.pend)
        if s.kind == START:
            return
        for c in t.alphabet:
            nxt = self._char(s, c)
            if nxt is not None:
                yield c, nxt

    def _char(self, s: _State, c: int) -> _State | None:
        t = self.t
        pend = set(s.pend)
        if s.closing is not None:
            residual = t.before_match(t.resolve(s.closing, c))
            if residual is None:
                return None  # the previous match would not have ended there
            pend.update(residual)
        if s.kind == GAP:
            pend.update(t.start)  # no match may start at a gap position
        resolved = t.resolve(pend, c)
        if t.matches(resolved):
            return None
        pend = frozenset(t.step(resolved, c))
        cur = None
        if s.kind == IN_MATCH:
            r = t.resolve(s.cur, c)
            cut = t.before_match(r)
            cur = t.step(r if cut is None else cut, c)
            if not cur:
                return None  # the match would have ended before this character
        return _State(s.kind, False, cur, None, pend)

    def _final(self, s: _State) -> bool:
        t = self.t
        if s.kind == START:
            return True
        if s.fresh or t.matches(t.resolve(s.pend, EOT)):
            return False
        return s.kind != IN_MATCH or t.before_match(t.resolve(s.cur, EOT)) is not None


def marked_dfa(pattern: str, max_states: int = 200_000, extra: dict | None = None) -> MarkedDfa:
    return MarkedDfa(compile_pattern(pattern, extra), max_states)


TYPED_MATCH, TYPED_GAP = 259, 260  # labels of the typed markers <m and <g (after MARKER and UNKSYM)


def marked_language(pattern: str, max_states: int = 200_000, extra: dict | None = None) -> pynini.Fst:
    """The marked DFA over UTF-8 bytes: every piece preceded by its typed marker (<m or <g)."""
    d = marked_dfa(pattern, max_states, extra)
    import numpy as np  # deferred: start-up of the command line


    arcs = np.array(d.arcs, np.int64).reshape(-1, 3)
    m = fst_from_arrays(len(d.states), 0, np.array(d.final, bool), arcs[:, 0], arcs[:, 1] + 1, arcs[:, 1] + 1,
                        arcs[:, 2])
    parts = [pynini.cross(_label(c + 1), ranges_acceptor(d.t.classes[c])) for c in d.t.alphabet]
    parts += [pynini.cross(_label(d.m_marker + 1), _label(TYPED_MATCH)),
              pynini.cross(_label(d.g_marker + 1), _label(TYPED_GAP))]
    expand = pynini.union(*parts).closure().optimize()
    marked = pynini.compose(m.arcsort("olabel"), expand.arcsort("ilabel")).project("output")
    return pynini.determinize(marked.rmepsilon()).minimize()


def _label(lab: int) -> pynini.Fst:
    return linear([lab])
