"""Co-reachability of the lazy canonical MaxMatch machine: masks without dead ends (Pitfalls 2025 Sec. 3.2).

A state of :class:`.product.Canonical` is live when a canonical completion reaches a final state.
Between words this is a property of the text automaton X alone: every word X can read is either
split greedily by WordPiece or is [UNK], and X carries both, so a state where the current word
may end (X final, or a word boundary into a co-reachable state of X) is live. Only inside a
word can a proposed piece leave no greedy continuation (a pending check bans every ``##`` piece
the rest of the word needs, or the word would pass max_input_chars_per_word). There the search
goes down the word, piece by piece, with memoized verdicts; a word is bounded (by the regex or
by the character limit the state counts), so the search ends. Most pieces are decided in bulk:
their next X state lets the word end.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from tokfst_cli.automata.symbols import MARKER

START, IN, CLOSED = 0, 1, 2  # the product's phases: before a word, inside one, after its end (``product``)


class Liveness:
    """Live-state verdicts of one :class:`Canonical` machine, memoized."""

    def __init__(self, machine) -> None:
        self.m = machine
        n = len(machine.delta)
        back: list[list[int]] = [[] for _ in range(n)]
        for s, arcs in enumerate(machine.delta):
            for t in arcs.values():
                back[t].append(s)
        co = machine.finals.copy()  # X's co-reachable states
        queue = deque(np.flatnonzero(co).tolist())
        while queue:
            for s in back[queue.popleft()]:
                if not co[s]:
                    co[s] = True
                    queue.append(s)
        self.co = co
        marker = np.array([machine.delta[s].get(MARKER, -1) for s in range(n)], np.int64)
        # the word may end at X state s: end of text, or a boundary into a co-reachable state
        self.endable = machine.finals | ((marker >= 0) & co[np.maximum(marker, 0)])
        self._memo: dict = {}

    def live(self, state) -> bool:
        """Can a canonical completion of ``state`` reach a final state?"""
        got = self._memo.get(state)
        if got is None:
            got = self._memo[state] = self._decide(state)
        return got

    def _decide(self, state) -> bool:
        x, pos = state[0], state[1]
        if pos != IN:
            w = self.m.word_start(state)
            return bool(self.m.finals[x]) or (w is not None and bool(self.co[w]))
        if self.endable[x]:
            return True
        ids, nxs = self.m.inner_candidates(state)
        if self.endable[nxs].any():
            return True
        return any(self.live(self.m.step(state, int(t))[0]) for t in ids)

    def keep(self, state, ids: np.ndarray, nxs: np.ndarray, inner: bool) -> np.ndarray:
        """Bool over candidate pieces ``ids`` (next X states ``nxs``): does the state after each live?
        ``inner``: ``##`` pieces continuing the word at ``state``; else word-initial pieces."""
        ok = self.endable[nxs].copy()
        if (~ok).any():
            start = (self.m.word_start(state), START, (), 0)
            for i in np.flatnonzero(~ok).tolist():
                nxt = self.m.step(state if inner else start, int(ids[i]))[0]
                ok[i] = nxt is not None and self.live(nxt)
        return ok
