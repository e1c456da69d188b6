"""Token-level filters of Pitfalls 2025 Sec. 4.3 (characters vs bytes): ``literal_ascii``, ``no_byte_tokens``.

A *literal* is a token, not a byte-fallback ``<0xNN>``, whose surface is exactly one UTF-8
character; CH is the set of characters that have one. Over the token labels (token id + 1):

* ``literal_ascii``: the byte-fallback tokens of ASCII characters in CH are banned (one state).
  Non-ASCII fallback bytes stay; a byte-level vocabulary (GPT-2) has no fallback tokens, so
  there F bans nothing.
* ``no_byte_tokens``: no character of CH is spelled with byte tokens: no token boundary falls
  strictly inside an occurrence of a CH character (a byte-fallback token, or a byte-level token
  that starts or ends inside it), and no ASCII character of CH is a fallback token. A character
  outside CH may still be spelled with bytes (e.g. a CJK character absent from Llama-2's
  vocabulary). F's states: B (at a character boundary) and the partial characters a token
  boundary can fall inside, each as the character's bytes so far if they begin some CH
  character, else as the number of bytes still missing. A token is read from a state by
  completing the pending character (banned if it is in CH), then its own characters; a token
  that does not continue valid UTF-8 has no arc (stage A's texts are valid UTF-8, so the
  promoted automaton never has one).

Both keep an agnostic S's states (``tokens``: their banned tokens' texts have allowed spellings);
the pre-token boundary label loops at every state.
"""

from __future__ import annotations

import numpy as np
import pynini

from tokfst_cli.filters.tokens import from_arcs
from tokfst_cli.tokenizer.model import _BYTE_TOKEN, TokenizerModel


def fallback_ids(model: TokenizerModel) -> list[int]:
    """Ids of the byte-fallback tokens ``<0xNN>`` (none without ``byte_fallback``)."""
    if not model.options.get("byte_fallback"):
        return []
    return [i for i, s in model.lexicon_items() if len(s) == 1 and _BYTE_TOKEN.match(model.tokens[i])]


def literal_chars(model: TokenizerModel) -> set[bytes]:
    """CH: the UTF-8 characters that some non-fallback token spells exactly."""
    fallback = set(fallback_ids(model))
    out = set()
    for i, s in model.lexicon_items():
        if i in fallback or len(s) > 4:
            continue
        try:
            if len(s.decode("utf-8")) == 1:
                out.add(s)
        except UnicodeDecodeError:
            pass
    return out


def _banned_fallback(model: TokenizerModel, chars: set[bytes]) -> list[int]:
    """Fallback tokens of ASCII characters that have a literal."""
    return [i for i in fallback_ids(model) if model.surfaces[i][0] < 0x80 and model.surfaces[i] in chars]


def literal_ascii(model: TokenizerModel, marker: int | None) -> pynini.Fst:
    """One state: every label but the banned fallback tokens."""
    allowed = np.ones(model.vocab_size, bool)
    allowed[_banned_fallback(model, literal_chars(model))] = False
    ids = np.flatnonzero(allowed)
    return from_arcs(1, np.zeros(len(ids), np.int64), ids + 1, np.zeros(len(ids), np.int64), marker)


def _width(lead: int) -> int:
    """Bytes of the UTF-8 character a byte starts (0: a continuation byte or not UTF-8)."""
    return 1 if lead < 0x80 else 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else \
        4 if 0xF0 <= lead < 0xF8 else 0


def _cont(b: int) -> bool:
    return 0x80 <= b < 0xC0


def _read(s: bytes) -> bytes | None:
    """Read ``s`` from a character boundary: b"" if it ends on one, else the partial character it
    ends with; None if it is not a UTF-8 prefix from a boundary."""
    i = 0
    while i < len(s):
        w = _width(s[i])
        if w == 0 or not all(map(_cont, s[i + 1:i + w])):
            return None
        if i + w > len(s):
            return s[i:]
        i += w
    return b""


def no_byte_tokens(model: TokenizerModel, marker: int | None) -> pynini.Fst:
    """The DFA described in the module docstring (minimized by ``from_arcs``)."""
    chars = literal_chars(model)
    heads = {c[:k] for c in chars for k in range(1, len(c))}  # partial CH characters
    banned = set(_banned_fallback(model, chars))
    ids: dict[object, int] = {b"": 0}  # state keys: b"" = B, a partial CH character, or ("free", bytes missing)
    todo: list[object] = []

    def state(partial: bytes | tuple) -> int:
        key = partial if isinstance(partial, tuple) or partial in heads or not partial \
            else ("free", _width(partial[0]) - len(partial))
        if key not in ids:
            ids[key] = len(ids)
            todo.append(key)
        return ids[key]

    arcs: list[tuple[int, int, int]] = []  # (state, label, next state)
    continuing = []  # tokens that start with a continuation byte: the only ones read inside a character
    for i, s in model.lexicon_items():
        if _cont(s[0]):
            continuing.append((i, s))
            continue
        if i in banned:
            continue
        try:
            s.decode("utf-8")
            end: bytes | None = b""
        except UnicodeDecodeError:
            end = _read(s)
        if end is not None:
            arcs.append((0, i + 1, state(end)))
    arcs += [(0, i + 1, 0) for i, s in enumerate(model.surfaces) if not s]  # e.g. [UNK] in a canonical result
    while todo:
        key = todo.pop()
        here = ids[key]
        missing = key[1] if isinstance(key, tuple) else _width(key[0]) - len(key)
        for i, s in continuing:
            head = s[:missing]
            if not all(map(_cont, head)):
                continue
            if len(s) < missing:
                nxt = state(("free", missing - len(s)) if isinstance(key, tuple) else key + s)
            elif not isinstance(key, tuple) and key + head in chars:
                continue  # a boundary inside a CH character
            else:
                end = _read(s[missing:])
                if end is None:
                    continue
                nxt = state(end)
            arcs.append((here, i + 1, nxt))
    src, lab, dst = np.array(arcs, np.int64).T
    return from_arcs(len(ids), src, lab, dst, marker)
