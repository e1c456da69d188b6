"""A decoding-loop view of any constraint: bitmasks, forced runs, history and rollback (Pitfalls 2025 Sec. 3.3.1;
Koo et al. 2024 Sec. 5.3).

:class:`Matcher` wraps a :class:`tokfst_cli.constraint.Decoder` (any artifact kind) for a
language model's generation loop:

    mask()           bool array over token ids (the stop ids added where the sequence may end)
    bitmask()        the same, packed as int32 words: bit ``t % 32`` of word ``t // 32`` is
                     token t (the layout xgrammar and llguidance fill for their logits kernels)
    fill_next_token_bitmask(bitmask, index)
                     the same into row ``index`` of a caller's batch buffer (numpy or torch
                     int32, :func:`allocate_token_bitmask`), as xgrammar's matcher does
    consume(token)   advance; a stop id ends the sequence (only where it may end)
    accept_token(t), accept_tokens(ts)
                     the same, returning False (and changing nothing) where not allowed
    validate_tokens(ts)
                     how many of a draft's tokens would be accepted, state unchanged
    rollback(k)      undo the last k consumed tokens (speculative decoding); reset()
    forced()         the tokens that are the only choice from here (coalescence, jump-forward)
    accept_string(s) advance by the tokens that spell a text (``spelling.spell``)
    find_jump_forward_string()
                     the longest text every continuation spells next (``spelling.jump_forward``)
    is_terminated()  a stop id consumed

``decoding.batched.BatchMatcher`` holds the matchers of a batch (one call fills every row).

:func:`pack` and :func:`forced` are the same operations on a bare decoder and state;
:func:`generate` is a numpy-only decoding loop over any next-token logits function (Koo et al. 2024
Sec. 2.4), returning :class:`Generated` (the ids, and whether it finished or was truncated);
:func:`allocate_token_bitmask`, :meth:`Matcher.fill_next_token_bitmask` and
:func:`apply_token_bitmask_inplace` are the batch-buffer shapes of vLLM, SGLang and xgrammar.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tokfst_cli.decoding import spelling
from tokfst_cli.errors import (
    DeadEnd,
    DisallowedTokenError,
    ForeignStateError,
    TokenRangeError,
    TokenTypeError,
    UsageError,
)
from tokfst_cli.tokenizer.model import TokenizerModel
from tokfst_cli.tokenizer.model import load as load_tokenizer


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


def token_id(token: Any, vocab_size: int | None = None) -> int:
    """``token`` as a Python int, or the one error of each misuse, the same in every decoder kind:
    TokenTypeError (a TypeError) unless it is an integer (numpy integers are, bools are not),
    TokenRangeError (a DisallowedTokenError, so a ValueError) outside ``0 <= token < vocab_size``.
    Each decoder's ``advance`` checks ``type(token) is int and 0 <= token < vocab_size`` inline
    and calls this only when that fails (the fast path stays one comparison)."""
    if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
        raise TokenTypeError(token)
    token = int(token)
    if vocab_size is not None and not 0 <= token < vocab_size:
        raise TokenRangeError(token, vocab_size)
    return token


def check_state(decoder: Any, state: Any) -> None:
    """After a decoder call failed: ForeignStateError if ``state`` is not shaped as one of
    ``decoder``'s states (its ``is_state``), else nothing (the caller re-raises its own error).
    Each decoder calls it from its methods' exception handlers, so a valid state costs nothing."""
    try:
        ok = decoder.is_state(state)
    except Exception:  # noqa: BLE001 - whatever the check meets, the state is not one of decoder's
        ok = False
    if not ok:
        raise ForeignStateError(state, type(decoder).__name__) from None


def int_state(state: Any, n: int) -> bool:
    """Is ``state`` an integer state of a decoder with ``n`` of them (0 to n - 1)?"""
    return isinstance(state, (int, np.integer)) and not isinstance(state, bool) and 0 <= state < n


class Steps:
    """What every decoder offers beyond the protocol (mixed into each decoder class):
    ``bitmask(state)`` (packed int32 words), ``forced(state)`` (the tokens that are the only
    choice, coalescence) and ``matcher(eos)`` (a :class:`Matcher` for one sequence). ``healing``:
    the token healing the constraint was built with (``healing.Healing``), or None.
    ``is_state(state)``: is ``state`` shaped as one of this decoder's (a cheap structural check,
    made only after a call failed, :func:`check_state`; an int state of another decoder whose states
    are ints in the same range cannot be told apart)."""

    healing = None

    def is_state(self, state: Any) -> bool:
        return True

    def bitmask(self, state: Any) -> np.ndarray:
        return pack(self.mask(state))

    def forced(self, state: Any) -> list[int]:
        return forced(self, state)[0]

    def matcher(self, eos: int | list[int] | None = None, tokenizer: TokenizerModel | None = None) -> Matcher:
        return Matcher(self, eos, tokenizer)


class Matcher:
    """A constraint's state with history, for one generated sequence.

    ``eos``: the stop ids (one id or several, as ``generation_config.eos_token_id`` gives them
    for Llama-3 or Qwen chat models; optional), each offered exactly at final states and ending
    the sequence. ``eos`` (the attribute) is the first of them. ``tokenizer`` (anything
    ``tokenizer.model.load`` takes): the model whose token surfaces :meth:`accept_string` and
    :meth:`find_jump_forward_string` read (a decoder's own ``model`` where it has one, as the lazy
    and pushdown decoders do)."""

    def __init__(self, decoder, eos: int | list[int] | tuple[int, ...] | None = None, tokenizer: Any = None):
        self.decoder = decoder
        self.tokenizer = load_tokenizer(tokenizer) if tokenizer is not None else getattr(decoder, "model", None)
        self.stop_ids = stop_ids(eos)
        self.eos = self.stop_ids[0] if self.stop_ids else None
        self.reset()

    def reset(self) -> None:
        """Back to the start, history cleared."""
        self.states = [self.decoder.initial()]
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
        if self.stop_ids and not self.terminated and self.decoder.is_final(self.state):
            m[[t for t in self.stop_ids if t < len(m)]] = True
        return m

    def bitmask(self) -> np.ndarray:
        """``mask()`` as packed int32 words (the decoder's own words where no stop bit is added)."""
        if not self.terminated and hasattr(self.decoder, "bitmask") and (
                not self.stop_ids or not self.decoder.is_final(self.state)):
            return self.decoder.bitmask(self.state)
        words = pack(self.mask())
        beyond = [t for t in self.stop_ids if t >= 32 * len(words)] if not self.terminated and self.is_final() else []
        if beyond:  # a stop id past the decoder's vocabulary (a model's padded rows)
            words = np.concatenate([words, np.zeros(max(beyond) // 32 + 1 - len(words), "<i4")])
            bits = words.view(np.uint32)
            for t in beyond:
                bits[t // 32] |= np.uint32(1 << (t % 32))
        return words

    def fill_next_token_bitmask(self, bitmask, index: int = 0) -> None:
        """Write :meth:`bitmask` into row ``index`` of ``bitmask`` (a numpy or torch int32 array of
        shape (batch, words), :func:`allocate_token_bitmask`); words past the mask are zeroed."""
        fill_rows(bitmask, [index], [self.bitmask()])

    def consume(self, token: int) -> None:
        """Take one token; DisallowedTokenError (nothing changes) if it is not allowed (TokenRangeError,
        one of them, for an id outside the decoder's vocabulary that is no stop id), TokenTypeError
        if it is not an integer."""
        if type(token) is not int:
            token = token_id(token)
        if self.terminated:
            raise DisallowedTokenError(token, "terminated")
        if token in self.stop_ids:
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
            if self.terminated and self.tokens[-1] in self.stop_ids:
                self.terminated = False
            self.tokens.pop()
            self.states.pop()

    def accept_token(self, token: int) -> bool:
        """:meth:`consume`, returning False (state unchanged) where the token is not allowed."""
        try:
            self.consume(token)
        except DisallowedTokenError:
            return False
        return True

    def accept_tokens(self, tokens: list[int]) -> bool:
        """All of ``tokens`` in order, or none of them (False, state unchanged)."""
        done = 0
        for t in tokens:
            if not self.accept_token(t):
                self.rollback(done)
                return False
            done += 1
        return True

    def validate_tokens(self, tokens: list[int]) -> int:
        """How many leading tokens of a draft (speculative decoding) would be accepted; the state
        is left as it was."""
        done = 0
        for t in tokens:
            if not self.accept_token(t):
                break
            done += 1
        self.rollback(done)
        return done

    def forced(self) -> list[int]:
        """The tokens that are the only choice from the current state (not consumed)."""
        return [] if self.terminated else forced(self.decoder, self.state)[0]

    def _spelling(self) -> spelling.Spelling:
        if self.tokenizer is None:
            raise UsageError("texts need the tokenizer: Matcher(decoder, eos, tokenizer=model)")
        return spelling.spelling(self.tokenizer)

    def accept_string(self, text: str | bytes) -> bool:
        """Advance by a text (its UTF-8 bytes): True if some allowed token sequence spells exactly
        it, and then its tokens are consumed (``tokens`` grows by them; the fewest tokens where
        several spell it: an agnostic constraint reaches the same state by each, a canonical one
        may not); False, state unchanged, where none does (also where the text could only end
        inside a token). The text is the tokens' surfaces (``spelling``); a stop id never spells it."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if self.terminated:
            return False
        ids = spelling.spell(self.decoder, self.state, data, self._spelling(), self.stop_ids)
        return ids is not None and self.accept_tokens(ids)

    def find_jump_forward_bytes(self) -> bytes:
        """The longest bytes every allowed continuation spells next (empty at a final state,
        where ending is a continuation, or where there is a choice): ``spelling.jump_forward``."""
        if self.terminated:
            return b""
        return spelling.jump_forward(self.decoder, self.state, self._spelling())

    def find_jump_forward_string(self) -> str:
        """:meth:`find_jump_forward_bytes` as text, cut after its last whole UTF-8 character
        (xgrammar's jump-forward decoding: the caller appends it without calling the model)."""
        return spelling.whole_text(self.find_jump_forward_bytes())

    def is_final(self) -> bool:
        return not self.terminated and self.decoder.is_final(self.state)

    def is_terminated(self) -> bool:
        return self.terminated




def stop_ids(eos) -> tuple[int, ...]:
    """The stop ids of an ``eos`` argument: None, one id, or a list of them (each an int >= 0)."""
    ids = () if eos is None else (eos,) if isinstance(eos, (int, np.integer)) else tuple(eos)
    if not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) and t >= 0 for t in ids):
        raise UsageError(f"stop ids must be token ids (integers >= 0), not {eos!r}")
    return tuple(int(t) for t in ids)


def allocate_token_bitmask(batch: int, vocab_size: int, torch: bool = False):
    """A zeroed int32 buffer of ``batch`` rows of packed masks over ``vocab_size`` ids (numpy, or a
    torch CPU tensor with ``torch=True``), for :meth:`Matcher.fill_next_token_bitmask`."""
    shape = (batch, (vocab_size + 31) // 32)
    if torch:
        import torch as _torch  # deferred: an optional dependency (tokfst[hf])

        return _torch.zeros(shape, dtype=_torch.int32)
    return np.zeros(shape, np.int32)


def fill_rows(bitmask, indices: list[int], words: list[np.ndarray]) -> None:
    """Rows ``indices`` of a numpy or torch int32 buffer set to ``words`` (each zero past its
    words), in one copy."""
    if getattr(bitmask, "dtype", None) is None or str(bitmask.dtype) not in ("int32", "torch.int32"):
        raise UsageError("the bitmask buffer must be an int32 numpy array or torch tensor (allocate_token_bitmask)")
    width = bitmask.shape[-1]
    rows = np.zeros((len(indices), width), np.int32)
    for row, w in zip(rows, words):
        if len(w) > width and np.any(w[width:]):
            raise UsageError(f"the bitmask buffer has {width} words a row; the mask needs {len(w)}")
        n = min(width, len(w))
        row[:n] = w[:n]
    if isinstance(bitmask, np.ndarray):
        bitmask[indices] = rows
    else:
        import torch  # deferred: an optional dependency (tokfst[hf])

        got = torch.from_numpy(rows).to(bitmask.device)
        if indices == list(range(len(indices))) and len(indices) == bitmask.shape[0]:
            bitmask.copy_(got)
        else:
            bitmask[torch.as_tensor(indices, dtype=torch.long, device=bitmask.device)] = got


def apply_token_bitmask_inplace(logits, bitmask) -> None:
    """Set to -inf the logits (torch, shape (batch, vocab) or (vocab,)) of the ids whose bit is
    clear in ``bitmask`` (int32, shape (batch, words) or (words,)); ids past the bitmask too."""
    import torch  # deferred: an optional dependency (tokfst[hf])

    words = bitmask if bitmask.dim() == logits.dim() else bitmask.unsqueeze(0)
    rows = logits if logits.dim() == 2 else logits.unsqueeze(0)
    vocab = rows.shape[-1]
    shifts = torch.arange(32, dtype=torch.int32, device=words.device)
    bits = ((words.unsqueeze(-1) >> shifts) & 1).flatten(-2).bool()
    allowed = torch.zeros(rows.shape, dtype=torch.bool, device=rows.device)
    n = min(vocab, bits.shape[-1])
    allowed[..., :n] = bits[..., :n].to(rows.device)
    rows.masked_fill_(~allowed, float("-inf"))


class Generated(list):
    """The ids :func:`generate` produced (a list, as before), with how it ended: ``finished``
    (a stop id was drawn, or a final state allowed nothing else) or not (``max_tokens`` reached:
    truncated, never silent), ``reason`` ("stop", "final" or "max_tokens") and ``stop`` (the stop
    id drawn, not in the list)."""

    def __init__(self, ids: list[int], reason: str, stop: int | None = None):
        super().__init__(ids)
        self.reason, self.stop = reason, stop
        self.finished = reason != "max_tokens"


def generate(logits: Callable[[list[int]], np.ndarray], matcher: Matcher, max_tokens: int = 256,
             rng: np.random.Generator | None = None, temperature: float = 1.0) -> Generated:
    """A numpy-only constrained decoding loop: per step the model's ``logits(tokens so far)``,
    -inf outside the matcher's mask, a softmax draw (greedy at temperature 0); stops after a stop
    id (not returned), at a final state with nothing else allowed, or after ``max_tokens``
    (``Generated.finished`` False: truncated)."""
    rng = rng or np.random.default_rng()
    for _ in range(max_tokens):
        mask = matcher.mask()
        if not mask.any():
            if matcher.is_final():
                return Generated(matcher.tokens, "final")
            raise DeadEnd(f"no token is allowed after {matcher.tokens}")
        scores = np.where(mask, np.asarray(logits(matcher.tokens), np.float64)[:len(mask)], -np.inf)
        if temperature == 0:
            token = int(np.argmax(scores))
        else:
            z = (scores - scores[mask].max()) / temperature
            p = np.exp(z)
            token = int(rng.choice(len(p), p=p / p.sum()))
        matcher.consume(token)
        if matcher.is_terminated():
            return Generated(matcher.tokens[:-1], "stop", token)
    return Generated(matcher.tokens, "final" if matcher.is_final() and not matcher.mask().any() else "max_tokens")
