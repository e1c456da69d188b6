"""Text over a token constraint: the allowed token sequences that spell a string (``accept_string``)
and the longest text every allowed continuation spells next (jump-forward decoding, as xgrammar's
``find_jump_forward_string``; the forced token run of ``matcher.forced`` is its special case: a
choice between tokens that spell the same next bytes is no choice of text).

A token sequence's text is its tokens' surfaces concatenated (``TokenizerModel.surfaces``: the
bytes of a byte-level token; SentencePiece's ▁ as a space, so at the canonical pipeline level the
▁ that HF prepends to the text is part of it; a byte-fallback token its byte). WordPiece puts
spaces between words that no token spells: its texts are refused here (UsageError).

Both walks are exact over the decoder's own masks: :func:`spell` is a shortest-path search over
(position in the string, decoder state) pairs, whose states are the decoder's (hashable) states;
:func:`jump_forward` advances a frontier of (state, bytes still owed by the last token) pairs
byte by byte while they all agree on the next byte, and stops at a final state (ending the
sequence is a continuation that spells nothing) or where two continuations differ.
"""

from __future__ import annotations

import codecs
from typing import Any

import numpy as np

from tokfst_cli.errors import DisallowedTokenError, UsageError
from tokfst_cli.tokenizer.model import TokenizerModel

JUMP_BYTES = 1 << 16  # the longest jump-forward text computed
JUMP_ITEMS = 1 << 14  # the most (state, owed bytes) pairs a jump-forward frontier holds (then it stops there)
_KEPT = 8  # spelling tables kept (one per tokenizer in use)


class Spelling:
    """A tokenizer's tokens by surface: ``ids[surface]`` the token ids spelling it, ``first`` the
    first byte of each id's surface (-1: none), ``longest`` the longest surface in bytes."""

    def __init__(self, model: TokenizerModel):
        if model.family == "wordpiece":
            raise UsageError("WordPiece texts have spaces between words that no token spells: give token ids "
                             "(accept_tokens) instead of a text")
        self.surfaces = model.surfaces
        self.ids: dict[bytes, list[int]] = {}
        self.first = np.full(model.vocab_size, -1, np.int16)
        for t, s in model.lexicon_items():
            self.ids.setdefault(s, []).append(t)
            self.first[t] = s[0]
        self.longest = max(map(len, self.ids), default=0)


_TABLES: dict[int, tuple[TokenizerModel, Spelling]] = {}  # id(model) -> (model, its table): the model kept alive


def spelling(model: TokenizerModel) -> Spelling:
    """The :class:`Spelling` of ``model``, made once (the last few kept)."""
    got = _TABLES.get(id(model))
    if got is None or got[0] is not model:
        while len(_TABLES) >= _KEPT:
            del _TABLES[next(iter(_TABLES))]
        got = _TABLES[id(model)] = (model, Spelling(model))
    return got[1]


def spell(decoder: Any, state: Any, data: bytes, table: Spelling, skip: tuple[int, ...] = ()) -> list[int] | None:
    """The fewest tokens, allowed one after another from ``state``, whose surfaces are exactly
    ``data`` (ties: the first found, longer tokens first), or None if no allowed sequence spells it;
    ``skip``: ids never used (a matcher's stop ids, which end the sequence rather than spell).
    Every state reached is kept once per position, so an agnostic constraint (one state per
    position) costs a dictionary lookup per (position, token length)."""
    n = len(data)
    best: list[dict[Any, tuple[int, int, Any, int]]] = [{} for _ in range(n + 1)]  # state -> (tokens, i, q, t)
    best[0][state] = (0, -1, None, -1)
    for i in range(n):
        for q, (count, *_) in list(best[i].items()):
            for j in range(min(n, i + table.longest), i, -1):
                for t in table.ids.get(data[i:j], ()):
                    if t in skip:
                        continue
                    try:
                        r = decoder.advance(q, t)
                    except DisallowedTokenError:
                        continue
                    if r not in best[j] or best[j][r][0] > count + 1:
                        best[j][r] = (count + 1, i, q, t)
    if not best[n]:
        return None
    q = min(best[n], key=lambda r: best[n][r][0])
    out, j = [], n
    while j > 0:
        _, i, prev, t = best[j][q]
        out.append(t)
        j, q = i, prev
    return out[::-1]


def jump_forward(decoder: Any, state: Any, table: Spelling, limit: int = JUMP_BYTES) -> bytes:
    """The longest bytes every allowed continuation from ``state`` starts with (module docstring):
    empty at a final state or where the allowed tokens start with different bytes. Stops early
    (a shorter, still common, prefix) past ``limit`` bytes or JUMP_ITEMS frontier pairs."""
    out = bytearray()
    items: set[tuple[Any, bytes]] = {(state, b"")}
    while len(out) < limit and len(items) <= JUMP_ITEMS:
        firsts: set[int] = set()
        allowed: dict[Any, np.ndarray] = {}
        for q, owed in items:
            if owed:
                firsts.add(owed[0])
            elif decoder.is_final(q):
                return bytes(out)
            else:
                allowed[q] = np.flatnonzero(decoder.mask(q))
                firsts.update(np.unique(table.first[allowed[q]]).tolist())
            if len(firsts) > 1:
                return bytes(out)
        if len(firsts) != 1 or -1 in firsts:
            return bytes(out)
        out.append(firsts.pop())
        nxt: set[tuple[Any, bytes]] = set()
        for q, owed in items:
            if owed:
                nxt.add((q, owed[1:]))
            else:
                nxt.update((decoder.advance(q, t), table.surfaces[t][1:]) for t in allowed[q].tolist())
        items = nxt
    return bytes(out)


def whole_text(data: bytes) -> str:
    """The longest prefix of ``data`` that is whole UTF-8 characters, as text."""
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data)
    except UnicodeDecodeError as e:
        return data[:e.start].decode("utf-8")
