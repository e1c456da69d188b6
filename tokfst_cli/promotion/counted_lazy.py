"""``max_tokens`` on the lazy decoder (Pitfalls 2025 App. B's Gamma^k without the product): the counted
decoder of ``filters.length`` over ``lazy.LazyDecoder``, with its fewest-tokens table found on demand.

``length.CountedDecoder`` walks S and carries the number of tokens taken; a token is allowed where
its next state still has a final state within the tokens left. Over the lazy decoder S is never
built, so the fewest tokens from a state of A to a final state are found on first use
(:class:`Fewest`): 0 at a final state, 1 a byte away from one (every byte is a token, ``lazy``),
else a breadth-first search over the token successors (``LazyDecoder.arcs``) to the first level
that holds a final state. The budget from which S's own mask is kept (``top``) is bounded above by
the most bytes to a final state from any state A reaches from there (:class:`Tops`: a token's
next state is one of them and needs at most that many one-byte tokens), so the searches run
only in the last steps of a sequence, where the budget binds.
"""

from __future__ import annotations

import numpy as np

from tokfst_cli.automata.arrays import unique
from tokfst_cli.filters.length import CountedDecoder
from tokfst_cli.filters.tokens import no_sequence
from tokfst_cli.promotion.lazy import LazyDecoder


class Fewest:
    """Per state of A, the fewest tokens to a final state, found on first use; indexed by a
    state (an int) or an array of states, as ``length.fewest``'s array."""

    def __init__(self, decoder: LazyDecoder, bytes_: np.ndarray):
        self.decoder, self.final = decoder, decoder.table.final
        self.known = np.where(bytes_ <= 1, bytes_, -1).astype(np.int64)  # -1: not found yet
        self._next: dict[int, list[int]] = {}

    def __len__(self) -> int:
        return len(self.known)

    def successors(self, s: int) -> list[int]:
        """The distinct states the allowed tokens lead to from ``s``."""
        got = self._next.get(s)
        if got is None:
            got = self._next[s] = unique(self.decoder.arcs(s)[1]).tolist()
        return got

    def of(self, s: int) -> int:
        if self.known[s] >= 0:
            return int(self.known[s])
        seen, level, d = {s}, [s], 0
        while level:  # A is trim: a final state is reached
            d += 1
            ahead = []
            for r in level:
                for q in self.successors(r):
                    if self.final[q]:
                        self.known[s] = d
                        return d
                    if q not in seen:
                        seen.add(q)
                        ahead.append(q)
            level = ahead
        raise AssertionError(f"state {s} reaches no final state")  # A is trim

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            return self.of(int(key))
        key = np.asarray(key, np.int64)
        for s in unique(key[self.known[key] < 0]).tolist():
            self.of(s)
        return self.known[key]


class Tops:
    """Per state s of A, the most bytes to a final state from any state reached from s by one
    byte or more: an upper bound of the fewest tokens after any token allowed at s (found on
    first use, one breadth-first pass over A's table)."""

    def __init__(self, decoder: LazyDecoder, bytes_: np.ndarray):
        self.delta, self.bytes, self.n = decoder.table.delta, bytes_, len(bytes_)
        self._got: dict[int, int] = {}

    def __getitem__(self, s: int) -> int:
        got = self._got.get(s)
        if got is None:
            seen = np.zeros(self.n + 1, bool)
            seen[self.n] = True  # the dead row
            level = unique(self.delta[s])
            while True:
                level = level[~seen[level]]
                if not len(level):
                    break
                seen[level] = True
                level = unique(self.delta[level].ravel())
            got = self._got[s] = int(self.bytes[seen[:self.n]].max(initial=-1))
        return got


class CountedLazy(CountedDecoder):
    """The lazy decoder within ``limit`` tokens: ``length.CountedDecoder``'s states (``k * n + s``:
    A's state s after k tokens) and masks, over :class:`Fewest` and :class:`Tops`."""

    def __init__(self, base: LazyDecoder, limit: int):
        distances = base.table.distances()
        super().__init__(base, limit, Fewest(base, distances), Tops(base, distances))
        self.model = base.model
        if self.fewest[base.initial()] > limit:  # as the promoted path: EmptyLanguageError
            raise no_sequence(["max_tokens"])

