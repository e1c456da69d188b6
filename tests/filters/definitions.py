"""The token filters' definitions (Pitfalls 2025 Sec. 4.3-4.5, App. B), checked one token sequence at a
time in plain Python: the reference the filtered automata are compared with."""

from __future__ import annotations

import re

from tokfst_cli.tokenizer.model import TokenizerModel

BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")
_FACTS: dict[int, tuple] = {}  # id(model) -> (fallback ids, literal characters, surfaces); models live all session


def facts(model: TokenizerModel) -> tuple[set[int], set[str], set[bytes]]:
    """The byte-fallback token ids, the characters some non-fallback token spells exactly, the surfaces."""
    if id(model) not in _FACTS:
        fallback = {t for t, _ in model.lexicon_items()
                    if model.options.get("byte_fallback") and BYTE_TOKEN.fullmatch(model.tokens[t])}
        chars = set()
        for tid, s in model.lexicon_items():
            try:
                text = s.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(text) == 1 and tid not in fallback:
                chars.add(text)
        _FACTS[id(model)] = fallback, chars, {s for _, s in model.lexicon_items()}
    return _FACTS[id(model)]


def literals(model: TokenizerModel) -> set[str]:
    return facts(model)[1]


def characters(data: bytes) -> list[tuple[int, int]]:
    """(start, end) byte offsets of the characters of valid UTF-8."""
    out, pos = [], 0
    for c in data.decode("utf-8"):
        n = len(c.encode("utf-8"))
        out.append((pos, pos + n))
        pos += n
    return out


def pieces(model: TokenizerModel, seq: tuple[int, ...], marker: int | None) -> list[list[int]]:
    """Token ids (label - 1) of a label sequence, split at the pre-token boundary label."""
    out: list[list[int]] = [[]]
    for label in seq:
        if label == marker:
            out.append([])
        else:
            out[-1].append(label - 1)
    return out


def spans(model: TokenizerModel, ids: list[int]) -> list[tuple[int, int, int]]:
    """(start, end, id) of each token in the concatenated surfaces."""
    out, pos = [], 0
    for t in ids:
        n = len(model.surfaces[t] or b"")
        out.append((pos, pos + n, t))
        pos += n
    return out


def no_byte_tokens(model: TokenizerModel, seq: tuple[int, ...], marker: int | None = None) -> bool:
    """No character with a literal token has a token boundary inside it, or is a fallback token."""
    fallback, chars, _ = facts(model)
    ids = [t for p in pieces(model, seq, marker) for t in p]
    toks = spans(model, ids)
    data = b"".join(model.surfaces[t] or b"" for t in ids)
    cuts = {a for a, _, _ in toks} | {b for _, b, _ in toks}
    for a, b in characters(data):
        c = data[a:b].decode("utf-8")
        if c not in chars:
            continue
        if any(a < x < b for x in cuts):
            return False
        if any(s == a and e == b and t in fallback for s, e, t in toks):
            return False
    return True


def literal_ascii(model: TokenizerModel, seq: tuple[int, ...], marker: int | None = None) -> bool:
    """No ASCII character with a literal token is a fallback token."""
    fallback, chars, _ = facts(model)
    return not any(t in fallback and model.surfaces[t][0] < 0x80 and chr(model.surfaces[t][0]) in chars
                   for p in pieces(model, seq, marker) for t in p)


def fuse_spaces(model: TokenizerModel, seq: tuple[int, ...], marker: int | None = None) -> bool:
    """No [ ][t] (within a pre-token) where a token spells " " + surface(t)."""
    surfaces = facts(model)[2]
    for p in pieces(model, seq, marker):
        for a, b in zip(p, p[1:]):
            if model.surfaces[a] == b" " and model.surfaces[b] is not None and b" " + model.surfaces[b] in surfaces:
                return False
    return True


def max_tokens(n: int):
    def check(model: TokenizerModel, seq: tuple[int, ...], marker: int | None = None) -> bool:
        return sum(len(p) for p in pieces(model, seq, marker)) <= n
    return check
