"""Stage P for BPE, its alphabet: a Split pattern's character sets, read off HF's engine (Pitfalls 2025 Sec. 3.1).

Hugging Face runs Split patterns with Oniguruma, whose Unicode tables (``\\p{L}``, ``\\s``, case
folding under ``(?i)``) need not match Python's ``unicodedata``. So the members of every atom of a
pattern are read off ``tokenizers`` itself: a ``Split(atom, behavior="removed")`` pre-tokenizer runs
over the string of every Unicode scalar value and what it removes is the atom's set (Pitfalls 2025
Sec. 3.1: P must be exact). The sets of one pattern are then partitioned into classes (code points
no atom tells apart), the alphabet of the split automaton.
"""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import tokenizers
from tokenizers import Regex
from tokenizers import pre_tokenizers as pt

from tokfst_cli.automata import utf8
from tokfst_cli.support.cache import cache_dir
from tokfst_cli.support.files import atomic_write

MAX_CP = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)
Ranges = list[tuple[int, int]]


@lru_cache(maxsize=1)
def _all_scalars() -> str:
    return "".join(map(chr, range(SURROGATES[0]))) + "".join(map(chr, range(SURROGATES[1] + 1, MAX_CP + 1)))


def _code_point(index: np.ndarray) -> np.ndarray:
    """Code point of each index into :func:`_all_scalars`."""
    return np.where(index < SURROGATES[0], index, index + (SURROGATES[1] - SURROGATES[0] + 1))


def pieces(tok, text: str, block: int = 1 << 16):
    """(piece, start, end) of ``tok.pre_tokenize_str`` over ``text`` in blocks: HF's time grows
    faster than the length on one 1.1M-character string. Only for per-character decisions."""
    for base in range(0, len(text), block):
        for piece, (lo, hi) in tok.pre_tokenize_str(text[base:base + block]):
            yield piece, base + lo, base + hi


def _probe(atom: str) -> Ranges:
    """The code points HF's engine matches with the one-character pattern ``atom``."""
    text = _all_scalars()
    matched = np.ones(len(text), bool)
    for _, lo, hi in pieces(pt.Split(Regex(atom), behavior="removed"), text):
        matched[lo:hi] = False
    idx = np.flatnonzero(matched)
    return ranges_of(_code_point(idx))


def ranges_of(cps: np.ndarray) -> Ranges:
    """Sorted code points as maximal [lo, hi] ranges."""
    if len(cps) == 0:
        return []
    cps = np.sort(np.asarray(cps, np.int64))
    cut = np.flatnonzero(np.diff(cps) != 1)
    starts = np.r_[cps[0], cps[cut + 1]]
    ends = np.r_[cps[cut], cps[-1]]
    return list(zip(starts.tolist(), ends.tolist()))


@lru_cache(maxsize=None)
def members(atom: str) -> tuple[tuple[int, int], ...]:
    """The ranges of ``atom`` (e.g. ``\\p{L}``, ``\\s``, ``(?i:s)``), cached on disk per tokenizers version."""
    path = cache_dir() / f"charclass-{tokenizers.__version__}.json"
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        table = {}
    if atom not in table:
        table[atom] = _probe(atom)
        try:
            atomic_write(path, lambda tmp: open(tmp, "w", encoding="utf-8").write(json.dumps(table)))
        except Exception:  # noqa: BLE001 - an unwritable cache only costs time
            pass
    return tuple((int(lo), int(hi)) for lo, hi in table[atom])


def complement(ranges: Ranges) -> Ranges:
    """All scalar values (no surrogates) outside ``ranges`` (any order, may overlap)."""
    return utf8.complement(union(ranges))


remove_surrogates = utf8.remove_surrogates


def union(*sets: Ranges) -> Ranges:
    merged: Ranges = []
    for a, b in sorted(r for s in sets for r in s):
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def partition(sets: list[Ranges]) -> tuple[list[Ranges], list[frozenset[int]]]:
    """Classes of code points no set tells apart, and each set as a set of class ids.

    Class 0 holds the code points in none of the sets (it may be empty)."""
    points = {0, MAX_CP + 1}
    for s in sets:
        for a, b in s:
            points.update((a, b + 1))
    bounds = np.array(sorted(points), np.int64)
    sig = np.zeros((len(bounds) - 1, max(len(sets), 1)), bool)
    for j, s in enumerate(sets):
        for a, b in s:
            lo, hi = np.searchsorted(bounds, a), np.searchsorted(bounds, b + 1)
            sig[lo:hi, j] = True
    keys = [row.tobytes() for row in sig]
    ids: dict[bytes, int] = {np.zeros(sig.shape[1], bool).tobytes(): 0}
    classes: list[Ranges] = [[]]
    for k, key in enumerate(keys):
        cid = ids.setdefault(key, len(ids))
        if cid == len(classes):
            classes.append([])
        classes[cid].append((int(bounds[k]), int(bounds[k + 1] - 1)))
    classes = [remove_surrogates(union(c)) for c in classes]
    as_ids = [frozenset(cid for key, cid in ids.items() if np.frombuffer(key, bool)[j]) for j in range(len(sets))]
    return classes, as_ids
