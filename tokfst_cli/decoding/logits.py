"""Constrained generation with Hugging Face ``transformers`` (Koo et al. 2024 Sec. 2.4).

A logits processor that keeps a model's sampling inside a tokfst constraint (any artifact
kind: ``constraint.load(path, tokenizer)`` or ``pipeline.build(...).decoder()``)::

    from tokfst_cli import constraint
    from tokfst_cli.decoding.logits import ConstraintLogitsProcessor

    decoder = constraint.load("date.index.json", "gpt2")
    proc = ConstraintLogitsProcessor(decoder, eos_token_id=model.generation_config.eos_token_id)
    out = model.generate(prompt, do_sample=True, max_new_tokens=32, logits_processor=[proc])

or in one call, the generated ids of each returned sequence without prompt, EOS and padding::

    from tokfst_cli.decoding.logits import generate
    ids = generate(model, [50256], decoder, eos_token_id=50256, num_return_sequences=10, do_sample=True)

:func:`tiny_model` is a randomly initialized GPT-2-architecture model of any vocabulary size, built
in code (tests and ``tokfst bench logits``: tokfst never downloads weights).

The processor keeps one :class:`tokfst_cli.decoding.matcher.Matcher` per batch row. Its first call
records the prompt length; every later call consumes the tokens generated since (the last
column of ``input_ids``), then sets the scores of every token outside the row's mask to -inf.
EOS (``eos_token_id``, the id ``generate`` stops on) is offered exactly at final states; a row
that has ended gets only EOS, so ``generate``'s batching (finished rows are padded) goes on.
Logits past the constraint's vocabulary (``vocab_size``, default the mask's length; a model's
padding rows) are always masked. Each row's mask is unpacked from the decoder's packed words
(``bitmask``: a stored row for the index and ``.fst`` forms, made in place by the factorized BPE
forms; the bool ``mask`` for the others) into one (rows, vocabulary) bool array that enters
torch in one ``from_numpy`` per call (rows at the same state share one mask): no Python loop
over the vocabulary. A row with nothing allowed at a non-final state (a dead end of a constraint) raises
:class:`tokfst_cli.decoding.matcher.DeadEnd`; ``steps``, ``seconds`` and ``max_allowed`` count the
processor's own work.

One processor serves one ``generate`` call (``reset()`` for another); rows must keep their
order, as in greedy search and sampling (beam search reorders rows: not supported).
``torch`` and ``transformers`` are imported on first use (``pip install 'tokfst[hf]'``);
``import tokfst_cli`` never needs them.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tokfst_cli.decoding.matcher import DeadEnd, Generated, Matcher, Steps, stop_ids
from tokfst_cli.errors import InputError

INSTALL = "pip install 'tokfst[hf]'"


def _require() -> tuple[Any, Any]:
    """(torch, transformers), or an InputError naming the extra that installs them."""
    try:
        import torch  # deferred: optional dependency (tokfst[hf])
        import transformers  # deferred: optional dependency (tokfst[hf])
    except ImportError as e:
        raise InputError(f"constrained generation needs torch and transformers ({e.name} is not installed)",
                         f"install them with {INSTALL}", hint="hf-extra") from None
    return torch, transformers


class _Masking:
    """``ConstraintLogitsProcessor(constraint, eos_token_id=None, vocab_size=None)``: a
    ``transformers.LogitsProcessor`` that sets the score of every token outside ``constraint``
    (a decoder of :mod:`tokfst_cli.constraint`) to -inf, per batch row (see the module docstring).

    ``eos_token_id``: the ids ``generate`` stops on (one, or a list as
    ``generation_config.eos_token_id`` gives for Llama-3 and Qwen chat models), each allowed
    exactly at final states. ``vocab_size``: tokens at or past it are never allowed (default: the
    constraint's mask length). InputError when torch or transformers is missing.
    """

    def __init__(self, constraint, eos_token_id: int | list[int] | None = None, vocab_size: int | None = None):
        self.torch = _require()[0]
        self.stop_ids = stop_ids(eos_token_id)
        self.constraint, self.eos, self.vocab_size = constraint, list(self.stop_ids) or None, vocab_size
        self.packed = getattr(type(constraint), "bitmask", Steps.bitmask) is not Steps.bitmask
        self.reset()

    def reset(self) -> None:
        """Forget the rows: the next call starts a new ``generate``."""
        self.matchers: list[Matcher] = []
        self.prompt_length: int | None = None
        self.seen = 0  # columns of input_ids consumed so far
        self.steps = 0  # calls (one per generated position)
        self.seconds = 0.0  # time spent in the calls
        self.max_allowed = 0  # the largest number of tokens any row was offered

    def __call__(self, input_ids, scores):
        t0 = time.perf_counter()
        rows, width = scores.shape
        if self.prompt_length is None:
            self.prompt_length = self.seen = input_ids.shape[1]
            self.matchers = [Matcher(self.constraint, self.eos) for _ in range(rows)]
        else:
            self._consume(input_ids)
        allowed = self.torch.from_numpy(self._masks(width)).to(scores.device)
        out = self.torch.where(allowed, scores, float("-inf"))
        self.steps += 1
        self.seconds += time.perf_counter() - t0
        return out

    def _consume(self, input_ids) -> None:
        if input_ids.shape[0] != len(self.matchers) or input_ids.shape[1] <= self.seen:
            raise InputError("this ConstraintLogitsProcessor already serves another generate call",
                             "make a new one or call reset()", hint="hf-reuse")
        new = input_ids[:, self.seen:].tolist()
        self.seen = input_ids.shape[1]
        for m, tokens in zip(self.matchers, new):
            for t in tokens:
                if m.is_terminated():
                    break  # generate pads a finished row
                m.consume(int(t))

    def _masks(self, width: int) -> np.ndarray:
        """(rows, width) bool: each row's allowed tokens; rows at the same state share the work."""
        out = np.zeros((len(self.matchers), width), bool)
        done: dict[Any, int] = {}  # (state, terminated) -> the row already written for it
        for i, m in enumerate(self.matchers):
            try:
                key = (m.state, m.is_terminated())
                j = done.get(key)
            except TypeError:  # an unhashable state: no sharing
                key, j = None, None
            if j is not None:
                out[i] = out[j]
                continue
            self._row(m, out[i])
            if key is not None:
                done[key] = i
        return out

    def _row(self, m: Matcher, row: np.ndarray) -> None:
        """Write the row's allowed tokens into ``row`` (all False). A decoder with its own packed
        masks (index, .fst, factorized BPE) gives its words, unpacked straight into the row;
        other decoders their bool mask."""
        width = len(row)
        limit = width if self.vocab_size is None else min(width, self.vocab_size)
        if m.is_terminated():
            row[m.tokens[-1]] = True  # a finished row: generate pads it, the sample must allow something
        elif self.packed:
            words = m.bitmask()  # EOS's bit set at final states
            n = min(limit, 32 * len(words))
            row[:n] = np.unpackbits(words.view(np.uint8), count=n, bitorder="little")
        else:
            mask = m.mask()
            n = min(limit, len(mask))
            row[:n] = mask[:n]
        count = int(np.count_nonzero(row))
        if count == 0:
            if m.is_final():
                raise DeadEnd(f"nothing is allowed after {m.tokens}, where the sequence may end: give eos_token_id")
            raise DeadEnd(f"no token is allowed after {m.tokens} (a dead end of the constraint, or a model "
                          f"vocabulary of {width} logits that misses the allowed tokens)")
        self.max_allowed = max(self.max_allowed, count)


_CLASS: type | None = None


def __getattr__(name: str):
    """``ConstraintLogitsProcessor``: built on first use over ``transformers.LogitsProcessor``."""
    global _CLASS
    if name != "ConstraintLogitsProcessor":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _CLASS is None:
        transformers = _require()[1]
        _CLASS = type(name, (_Masking, transformers.LogitsProcessor),
                      {"__module__": __name__, "__qualname__": name, "__doc__": _Masking.__doc__})
    return _CLASS


def generate(model, prompt: list[int], constraint=None, eos_token_id: int | list[int] | None = None,
             vocab_size: int | None = None, **kwargs) -> list[Generated]:
    """``model.generate`` from one prompt under ``constraint``: the generated ids of each returned
    sequence (``num_return_sequences`` and other ``generate`` options in ``kwargs``; processors
    in ``logits_processor`` run before the constraint's), without the prompt, the stop id that
    ended it and the padding after, as :class:`~tokfst_cli.decoding.matcher.Generated` lists:
    ``finished`` is False for a sequence cut at ``max_new_tokens`` (truncated, never silent).
    ``eos_token_id``: one stop id or several. ``constraint``: a decoder, a
    ``ConstraintLogitsProcessor`` (to read its counters afterwards), or None (unconstrained)."""
    torch = _require()[0]
    processors = list(kwargs.pop("logits_processor", []))  # the caller's first: the mask has the last word
    if constraint is not None:
        is_processor = isinstance(constraint, _Masking)
        processors.append(constraint if is_processor else __getattr__("ConstraintLogitsProcessor")(
            constraint, eos_token_id, vocab_size))
    ids = torch.tensor([list(prompt)], dtype=torch.long, device=model.device)
    stops = stop_ids(eos_token_id)
    pad = kwargs.pop("pad_token_id", stops[0] if stops else None)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), logits_processor=processors,
                             eos_token_id=eos_token_id, pad_token_id=pad, **kwargs)
    return [_trim(row, stop_ids(eos_token_id)) for row in out[:, len(prompt):].tolist()]


def _trim(row: list[int], stops: tuple[int, ...]) -> Generated:
    """The ids before the first stop id (the rest is generate's padding); not finished without one."""
    end = next((i for i, t in enumerate(row) if t in stops), None)
    return Generated(row, "max_tokens") if end is None else Generated(row[:end], "stop", row[end])


def tiny_model(vocab_size: int, bos_token_id: int, eos_token_id: int, seed: int = 0):
    """A randomly initialized GPT-2-architecture model over ``vocab_size`` tokens (1 layer,
    32-dimensional, 2 heads, 256 positions; torch seed ``seed``), in eval mode: for tests and
    benchmarks of the decoding loop. Nothing is downloaded."""
    torch, transformers = _require()
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=vocab_size, n_layer=1, n_embd=32, n_head=2, n_positions=256,
                                     bos_token_id=bos_token_id, eos_token_id=eos_token_id)
    return transformers.GPT2LMHeadModel(config).eval()
