"""JSON strings: from a language of decoded strings to the texts that spell them (RFC 8259 Sec. 7).

Constraints on strings (``pattern``, ``minLength``/``maxLength``, ``format``) are languages of
*decoded* strings, as UTF-8 byte automata. :func:`text` spells each decoded string in its one
canonical JSON form, the one ``json.dumps(s, ensure_ascii=False)`` writes: ``\\"``, ``\\\\``,
``\\b \\f \\n \\r \\t`` and ``\\u00xx`` (lowercase hex) for the other control characters,
everything else literally (no ``\\/``, no ``\\uXXXX`` for printable characters). The spelling
is a prefix code applied letter by letter (a composition with a one-state transducer), so
it is injective and commutes with intersection and difference: the automata for strings
stay exact under every Boolean operation of the schema.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import numpy as np
import pynini

from tokfst_cli.automata import utf8
from tokfst_cli.automata.arrays import fst_arrays
from tokfst_cli.automata.fsts import ranges_acceptor
from tokfst_cli.schema.automata import Budget, regex


@lru_cache(maxsize=1)
def escapes() -> dict[int, bytes]:
    """Byte -> its escape, for the characters JSON must escape (from Python's own json encoder)."""
    out = {}
    for b in range(0x80):
        spelled = json.dumps(chr(b), ensure_ascii=False)[1:-1]
        if spelled != chr(b):
            out[b] = spelled.encode("ascii")
    return out


@lru_cache(maxsize=1)
def _escaped_labels() -> np.ndarray:
    return np.array([b + 1 for b in escapes()], np.int64)


@lru_cache(maxsize=1)
def _escape_transducer() -> pynini.Fst:
    """Decoded UTF-8 bytes -> their canonical spelling inside a JSON string."""
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    f.add_state()
    f.set_start(0)
    f.set_final(0)
    esc = escapes()
    for b in range(256):
        out = esc.get(b)
        if out is None:
            f.add_arc(0, pynini.Arc(b + 1, b + 1, one, 0))
            continue
        src, first = 0, True
        for k, o in enumerate(out):
            dst = 0 if k == len(out) - 1 else f.add_state()
            f.add_arc(src, pynini.Arc(b + 1 if first else 0, o + 1, one, dst))
            src, first = dst, False
    return f.arcsort("ilabel")


def spelled(budget: Budget, decoded: pynini.Fst | None) -> pynini.Fst | None:
    """The canonical JSON spellings (without quotes) of a language of decoded strings (a minimal DFA)."""
    if decoded is None:
        return None
    if not np.isin(fst_arrays(decoded).ilabel, _escaped_labels()).any():
        return decoded  # nothing to escape: the spelling is the identity
    body = pynini.compose(decoded.copy().arcsort("olabel"), _escape_transducer()).project("output")
    return budget.wide_dfa(body, "the spelling of a string language")


def text(budget: Budget, decoded: pynini.Fst | None) -> pynini.Fst | None:
    """The JSON string texts (with quotes) of a language of decoded strings (a minimal DFA)."""
    body = spelled(budget, decoded)
    return None if body is None else quoted(body)


def quoted(body: pynini.Fst) -> pynini.Fst:
    """'"' body '"' for a minimal DFA ``body`` without '"': built in place, so still a minimal DFA."""
    f = body.copy()
    one, zero = pynini.Weight.one(f.weight_type()), pynini.Weight.zero(f.weight_type())
    q = ord('"') + 1
    finals = [s for s in f.states() if f.final(s) != zero]
    start, end = f.add_state(), f.add_state()
    f.add_arc(start, pynini.Arc(q, q, one, f.start()))
    for s in finals:
        f.set_final(s, zero)
        f.add_arc(s, pynini.Arc(q, q, one, end))
    f.set_start(start)
    f.set_final(end)
    return f


def quote(value: str) -> str:
    """The canonical text of one string (what :func:`text` spells it as)."""
    return json.dumps(value, ensure_ascii=False)


@lru_cache(maxsize=1)
def any_character() -> pynini.Fst:
    """One Unicode scalar value, as UTF-8 (a minimal DFA)."""
    return pynini.determinize(ranges_acceptor([(0, utf8.MAX_CODE_POINT)])).minimize()


@lru_cache(maxsize=1)
def any_string() -> pynini.Fst:
    """Every decoded string."""
    return pynini.determinize(any_character().copy().closure()).minimize()


@lru_cache(maxsize=1)
def any_body() -> pynini.Fst:
    """The spellings of every string, without quotes (what :data:`.automata.BODY` stands for)."""
    return spelled(Budget(1 << 20, any_body), any_string())


def _spelled_character() -> str:
    """A regex for the canonical spelling of one character (literal or escape)."""
    escaped = "".join(f"\\x{b:02x}" for b in escapes())
    return f"(?:[^{escaped}]|" + "|".join(re.escape(e.decode("ascii")) for e in escapes().values()) + ")"


def spelled_length(budget: Budget, lo: int, hi: int | None) -> pynini.Fst | None:
    """The spellings (without quotes) of the strings of ``lo`` to ``hi`` code points (None: no bound).

    Counted on the spelling directly: one character is a literal or one escape, a prefix
    code, so stage A's chained repetition builds it (no composition).
    """
    if hi is not None and hi < lo:
        return None
    return regex(_spelled_character() + f"{{{lo},{'' if hi is None else hi}}}", budget)
