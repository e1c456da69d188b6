"""``max_tokens`` on the factorized canonical BPE product, without the product (Pitfalls 2025 App. B's Gamma^k).

C(S ∩ F_N) = C(S) ∩ F_N: the decoder walks the factorized C(S) (``product.Factorized`` or
``pretokenized.MarkedFactorized``) and carries the number k of tokens taken. Its co-reachability
table was computed by layers (``liveness.compute(limit=N)``): per member, the fewest canonical
tokens to a final state. Token t is offered at (state, k) iff some member offers it and the
member after it reaches a final state within N - k - 1 more tokens. That is the product with
F_N state for state, so masks are exact and walks never meet a dead end; a member whose
successors all fit the budget keeps its own packed sets (``Liveness.words``' budget).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pynini

from tokfst_cli.automata.bitsets import as_int32, as_words
from tokfst_cli.bpe.implicit import ImplicitBpe
from tokfst_cli.bpe.product import Factorized, sorted_arcs_reader
from tokfst_cli.decoding.matcher import Steps, check_state, int_state, token_id, unpack
from tokfst_cli.errors import DisallowedTokenError, UsageError


class CountedFactorized(Steps):
    """The factorized decoder ``base`` within ``limit`` tokens; a state is (base state, k)."""

    def __init__(self, base, limit: int):
        if base.live.dist is None:
            raise UsageError("the co-reachability table has no distances (compute it with limit=N)")
        self.base, self.limit = base, limit
        self.live, self.word, self.imp = base.live, base.word, base.imp
        self.vocab_size = base.imp.vocab_size
        self.finals, self.start = base.finals, base.start
        self.marked = not isinstance(base, Factorized)

    def _members(self, inner: Any) -> Any:
        return inner if self.marked else (inner,)

    def empty(self) -> bool:
        """No sequence of at most ``limit`` tokens (the pipeline refuses it)."""
        s = self.initial()
        return not self.is_final(s) and not self.bitmask(s).any()

    def initial(self) -> tuple[Any, int]:
        return (self.base.initial(), 0)

    def is_state(self, state: Any) -> bool:
        return (type(state) is tuple and len(state) == 2 and self.base.is_state(state[0])
                and int_state(state[1], self.limit + 1))

    def mask(self, state: tuple[Any, int]) -> np.ndarray:
        return unpack(self.bitmask(state), self.imp.vocab_size)

    def bitmask(self, state: tuple[Any, int], out: np.ndarray | None = None) -> np.ndarray:
        """``mask(state)`` as packed int32 words (into ``out`` if given)."""
        try:
            inner, k = state
            return as_int32(self.live.words(self._members(inner), as_words(out), budget=self.limit - k - 1))
        except Exception:
            check_state(self, state)
            raise

    def advance(self, state: tuple[Any, int], token: int) -> tuple[Any, int]:
        if type(token) is not int or not 0 <= token < self.vocab_size:
            token = token_id(token, self.vocab_size)
        try:
            inner, k = state
            budget = self.limit - k - 1
            for p, cls, fb, node in self._members(inner):
                labels = self.base.arcs(p)[0]
                i = int(np.searchsorted(labels, token))
                if (i < len(labels) and labels[i] == token and self.word.allows(cls, fb, token)
                        and self.live.far_next(p, cls, fb, node)[i] <= budget):
                    return (self.base.advance(inner, token), k + 1)
        except Exception:
            check_state(self, state)
            raise
        raise DisallowedTokenError(token, state)

    def is_final(self, state: tuple[Any, int]) -> bool:
        try:
            inner, _ = state
            return self.base.is_final(inner)
        except Exception:
            check_state(self, state)
            raise


def factorize(agnostic: pynini.Fst, imp: ImplicitBpe, limit: int | None = None):
    """Wrap S and the implicit A_BPE; their co-reachability is computed, nothing else is expanded.
    ``limit`` (``max_tokens``): within that many tokens (``counted.CountedFactorized``)."""
    zero = pynini.Weight.zero(agnostic.weight_type())
    finals = np.array([agnostic.final(s) != zero for s in range(agnostic.num_states())])
    return counted(Factorized(sorted_arcs_reader(agnostic), finals, agnostic.start(), imp, limit=limit), limit)


def counted(decoder, limit: int | None):
    """The decoder within ``limit`` tokens (itself when None)."""
    if limit is None:
        return decoder
    from tokfst_cli.bpe.counted import CountedFactorized  # deferred: start-up: only this path needs it

    return CountedFactorized(decoder, limit)
