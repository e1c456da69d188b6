"""Token healing by construction (Pitfalls 2025 Sec. 4.4): the prompt prepended to the constraint.

The prompt's text is concatenated before the regex's language (A' = prompt · A) and the whole
goes through P, S and C, so the canonical automaton knows how the prompt's last tokens merge
with what follows. :func:`settle` then walks the tokens every accepted sequence starts with and
that lie inside the prompt: the caller keeps them, and decoding starts at the state after them.

With e = ``encode(prompt)``, the kept prefix is e[:k] for the largest k such that every accepted
sequence starts with e[:k]: from the start, along e, each state passed is not final and allows
exactly the next token of e (Pitfalls 2025 Sec. 3.3.1: that part of a canonical automaton is
deterministic). The materialized automaton's start moves to the state after e[:k] (the index
follows); a factorized decoder's ``initial()`` becomes that state, and its artifact records the
kept ids (``bpe.factorized``, ``maxmatch.factorized``), which the loader walks again.
"""

from __future__ import annotations

import json
import struct
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pynini

from tokfst_cli.automata.fsts import text_acceptor
from tokfst_cli.errors import DisallowedTokenError, InputError
from tokfst_cli.tokenizer.model import TokenizerModel
from tokfst_cli.tokenizer.reference import HfReference


@dataclass
class Healing:
    """The prompt's tokens the caller keeps, and how many of ``encode(prompt)``'s last tokens the
    constraint re-tokenizes."""

    prompt: str
    kept: list[int]
    retokenized: int

    def to_json(self) -> dict[str, Any]:
        """The artifacts' ``healing`` field: {"prompt", "kept", "retokenized"}."""
        return asdict(self)

    @classmethod
    def from_json(cls, value: Any) -> Healing | None:
        """The field read back; None if it is not one (the loader then calls the file damaged)."""
        if not (isinstance(value, dict) and set(value) == {"prompt", "kept", "retokenized"}):
            return None
        prompt, kept, retokenized = value["prompt"], value["kept"], value["retokenized"]
        if (isinstance(prompt, str) and type(kept) is list and all(type(t) is int and t >= 0 for t in kept)
                and type(retokenized) is int and retokenized >= 0):
            return cls(prompt, kept, retokenized)
        return None


def prefixed(model: TokenizerModel, fst: pynini.Fst, prompt: str) -> pynini.Fst:
    """prompt · A as a minimal byte DFA; InputError for a prompt holding an added token's text
    (``encode`` splits it out before P, Pitfalls 2025 Sec. 3.1)."""
    for token in model.added_tokens:
        content = token.get("content")
        if isinstance(content, str) and content and content in prompt:
            raise InputError(f"the prompt contains the added token {content!r}, which the tokenizer splits out",
                             "give the prompt's text after its last added token", hint="prompt-added-token",
                             content=content)
    out = pynini.concat(text_acceptor(prompt), fst).rmepsilon()
    out = pynini.determinize(out).minimize()
    return out.set_input_symbols(fst.input_symbols()).set_output_symbols(fst.output_symbols())


def encode(model: TokenizerModel, prompt: str) -> list[int]:
    """``encode(prompt, add_special_tokens=False).ids`` of Hugging Face's tokenizer."""
    try:
        hf = HfReference(model).hf
    except Exception as e:  # tokenizers raises its own Exception type
        raise InputError(f"token healing needs the tokenizer file, and {model.source} cannot be read by "
                         f"Hugging Face's tokenizers: {e}", "load the tokenizer from its tokenizer.json") from None
    return hf.encode(prompt, add_special_tokens=False).ids


def walk(decoder, tokens: list[int]) -> tuple[int, Any]:
    """k, the length of the longest prefix of ``tokens`` every sequence ``decoder`` accepts starts
    with (each state passed is not final and allows only the next token), and the state after it."""
    state = decoder.initial()
    for k, token in enumerate(tokens):
        if decoder.is_final(state):
            return k, state
        allowed = np.flatnonzero(decoder.mask(state))
        if len(allowed) != 1 or allowed[0] != token:
            return k, state
        state = decoder.advance(state, token)
    return len(tokens), state


def start_after(decoder, healing: Healing) -> Any:
    """``decoder`` with ``initial()`` the state after ``healing.kept`` and ``decoder.healing`` set
    (a factorized decoder, in process or loaded); DisallowedTokenError if a kept id is refused."""
    state = decoder.initial()
    for token in healing.kept:
        state = decoder.advance(state, token)
    decoder.initial = lambda: state  # the instance's start shadows the class's
    decoder.healing = healing
    return decoder


def settle(result, prompt: str) -> Healing:
    """Move ``result``'s start past the kept prefix; the :class:`Healing`."""
    e = encode(result.model, prompt)
    k, state = walk(result.decoder(), e)
    healing = Healing(prompt, e[:k], len(e) - k)
    if result.materialized:
        result.fst.set_start(state).connect()
        result.arrays = None  # changed in place
    else:
        start_after(result.lazy, healing)
    return healing


def resume(decoder, header: dict, healed: bool, damaged) -> Any:
    """A loaded factorized decoder, moved past the kept ids of its header's ``healing`` field when
    ``healed`` (the format version that has it); ``damaged(why)`` is the loader's error."""
    if not healed:
        decoder.healing = None
        return decoder
    healing = Healing.from_json(header.get("healing"))
    if healing is None:
        raise damaged("healing field")
    try:
        return start_after(decoder, healing)
    except DisallowedTokenError:
        raise damaged("the kept prompt tokens are not a path") from None


def stored_version(data: bytes, magic: bytes, versions: tuple[int, ...]) -> int:
    """The container header's version when it is one of ``versions`` (without and with the
    ``healing`` field), else the first: ``artifacts.unpack`` then refuses the file in its words."""
    try:
        (size,) = struct.unpack_from("<I", data, len(magic))
        version = json.loads(data[len(magic) + 4:len(magic) + 4 + size]).get("version")
    except (struct.error, ValueError, UnicodeDecodeError, RecursionError, AttributeError):
        return versions[0]
    return version if version in versions else versions[0]
