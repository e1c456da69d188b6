"""A decoding-loop view of any constraint: bitmasks, forced runs, history and rollback (Pitfalls 2025 Sec. 3.3.1;
Koo et al. 2024 Sec. 5.3).

:class:`Matcher` wraps a :class:`tokfst_cli.constraint.Decoder` (any artifact kind) for a
language model's generation loop:

    mask()           bool array over token ids (EOS added where the sequence may end)
    bitmask()        the same, packed as int32 words: bit ``t % 32`` of word ``t // 32`` is
                     token t (the layout xgrammar and llguidance fill for their logits kernels)
    consume(token)   advance; EOS ends the sequence (only where it may end)
    rollback(k)      undo the last k consumed tokens (speculative decoding)
    forced()         the tokens that are the only choice from here (coalescence, jump-forward)
    is_terminated()  EOS consumed

:func:`pack` and :func:`forced` are the same operations on a bare decoder and state;
:func:`generate` is a numpy-only decoding loop over any next-token logits function (Koo et al. 2024
Sec. 2.4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tokfst_cli.errors import DeadEnd, DisallowedTokenError, UsageError


def pack(mask: np.ndarray) -> np.ndarray:
    """A bool mask over token ids as int32 words, bit t % 32 of word t // 32 (little-endian)."""
    words = (len(mask) + 31) // 32
    bits = np.packbits(np.asarray(mask, bool), bitorder="little")
    out = np.zeros(words * 4, np.uint8)
    out[:len(bits)] = bits
    return out.view("<i4")


def unpack(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    """Inverse of :func:`pack`."""
    return np.unpackbits(np.asarray(bitmask, "<i4").view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


def forced(decoder, state: Any, limit: int = 1 << 16) -> tuple[list[int], Any]:
    """The run of tokens that are the only choice from ``state`` (stopping where the sequence may
    end, since ending is then a choice too), and the state after them."""
    run: list[int] = []
    while len(run) < limit and not decoder.is_final(state):
        allowed = np.flatnonzero(decoder.mask(state))
        if len(allowed) != 1:
            break
        run.append(int(allowed[0]))
        state = decoder.advance(state, run[-1])
    return run, state


class Steps:
    """What every decoder offers beyond the protocol (mixed into each decoder class):
    ``bitmask(state)`` (packed int32 words), ``forced(state)`` (the tokens that are the only
    choice, coalescence) and ``matcher(eos)`` (a :class:`Matcher` for one sequence). ``healing``:
    the token healing the constraint was built with (``healing.Healing``), or None."""

    healing = None

    def bitmask(self, state: Any) -> np.ndarray:
        return pack(self.mask(state))

    def forced(self, state: Any) -> list[int]:
        return forced(self, state)[0]

    def matcher(self, eos: int | None = None) -> Matcher:
        return Matcher(self, eos)


class Matcher:
    """A constraint's state with history, for one generated sequence.

    ``eos`` (the tokenizer's end-of-sequence id, optional) is offered exactly at final states
    and ends the sequence; ``vocab_size`` defaults to the decoder's mask length."""

    def __init__(self, decoder, eos: int | None = None):
        self.decoder, self.eos = decoder, eos
        self.states = [decoder.initial()]
        self.tokens: list[int] = []
        self.terminated = False

    @property
    def state(self) -> Any:
        return self.states[-1]

    def mask(self) -> np.ndarray:
        if self.terminated:
            m = np.zeros(len(self.decoder.mask(self.state)), bool)
        else:
            m = self.decoder.mask(self.state).copy()
        if self.eos is not None and not self.terminated and self.decoder.is_final(self.state):
            m[self.eos] = True
        return m

    def bitmask(self) -> np.ndarray:
        """``mask()`` as packed int32 words (the decoder's own words where no EOS bit is added)."""
        if not self.terminated and hasattr(self.decoder, "bitmask") and (
                self.eos is None or not self.decoder.is_final(self.state)):
            return self.decoder.bitmask(self.state)
        return pack(self.mask())

    def consume(self, token: int) -> None:
        """Take one token; DisallowedTokenError (nothing changes) if it is not allowed."""
        if self.terminated:
            raise DisallowedTokenError(token, "terminated")
        if self.eos is not None and token == self.eos:
            if not self.decoder.is_final(self.state):
                raise DisallowedTokenError(token, self.state)
            self.tokens.append(token)
            self.states.append(self.state)
            self.terminated = True
            return
        nxt = self.decoder.advance(self.state, token)
        self.tokens.append(token)
        self.states.append(nxt)

    def rollback(self, k: int = 1) -> None:
        """Undo the last ``k`` consumed tokens (EOS included)."""
        if not 0 <= k <= len(self.tokens):
            raise UsageError(f"cannot roll back {k} of {len(self.tokens)} tokens")
        for _ in range(k):
            if self.terminated and self.tokens[-1] == self.eos:
                self.terminated = False
            self.tokens.pop()
            self.states.pop()

    def forced(self) -> list[int]:
        """The tokens that are the only choice from the current state (not consumed)."""
        return [] if self.terminated else forced(self.decoder, self.state)[0]

    def is_final(self) -> bool:
        return not self.terminated and self.decoder.is_final(self.state)

    def is_terminated(self) -> bool:
        return self.terminated




def generate(logits: Callable[[list[int]], np.ndarray], matcher: Matcher, max_tokens: int = 256,
             rng: np.random.Generator | None = None, temperature: float = 1.0) -> list[int]:
    """A numpy-only constrained decoding loop: per step the model's ``logits(tokens so far)``,
    -inf outside the matcher's mask, a softmax draw (greedy at temperature 0); stops after EOS
    (not returned), at a final state with nothing else allowed, or after ``max_tokens``."""
    rng = rng or np.random.default_rng()
    for _ in range(max_tokens):
        mask = matcher.mask()
        if not mask.any():
            if matcher.is_final():
                break
            raise DeadEnd(f"no token is allowed after {matcher.tokens}")
        scores = np.where(mask, np.asarray(logits(matcher.tokens), np.float64), -np.inf)
        if temperature == 0:
            token = int(np.argmax(scores))
        else:
            z = (scores - scores[mask].max()) / temperature
            p = np.exp(z)
            token = int(rng.choice(len(p), p=p / p.sum()))
        matcher.consume(token)
        if matcher.is_terminated():
            return matcher.tokens[:-1]
    return list(matcher.tokens)
