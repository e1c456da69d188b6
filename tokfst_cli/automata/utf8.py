"""Stage A's alphabet: code point ranges to UTF-8 byte-range sequences (Pitfalls 2025 Sec. 3, App. A).

The classic split used by byte-level regex engines: cut a code point range at the encoding
length boundaries, then at continuation-byte boundaries, until each piece is a product of byte
ranges ``[(lo1, hi1), (lo2, hi2), ...]``. Surrogates (U+D800-U+DFFF) have no UTF-8 encoding and
are removed first, so every sequence produced is valid UTF-8 and nothing else is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)
_LENGTH_BOUNDS = (0x7F, 0x7FF, 0xFFFF, MAX_CODE_POINT)

ByteRanges = tuple[tuple[int, int], ...]


def ranges_of(code_points: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted, merged inclusive ranges covering the given code points."""
    out: list[tuple[int, int]] = []
    for cp in sorted(set(code_points)):
        if out and out[-1][1] + 1 == cp:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out


def ranges_of_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, merged inclusive ranges covering a union of ranges."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """All Unicode scalar values not in ``ranges`` (sorted, disjoint)."""
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = max(nxt, hi + 1)
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return remove_surrogates(out)


def remove_surrogates(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    s_lo, s_hi = SURROGATES
    for lo, hi in ranges:
        if hi < s_lo or lo > s_hi:
            out.append((lo, hi))
            continue
        if lo < s_lo:
            out.append((lo, s_lo - 1))
        if hi > s_hi:
            out.append((s_hi + 1, hi))
    return out


def _encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8")


def _split_same_length(lo: int, hi: int) -> Iterator[ByteRanges]:
    n = len(_encode(lo))
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if (lo & ~m) != (hi & ~m):
            if lo & m:
                yield from _split_same_length(lo, lo | m)
                yield from _split_same_length((lo | m) + 1, hi)
                return
            if (hi & m) != m:
                yield from _split_same_length(lo, (hi & ~m) - 1)
                yield from _split_same_length(hi & ~m, hi)
                return
    yield tuple(zip(_encode(lo), _encode(hi)))


def sequences(ranges: Iterable[tuple[int, int]]) -> Iterator[ByteRanges]:
    """Byte-range sequences whose union is exactly the UTF-8 encodings of ``ranges``."""
    for lo, hi in remove_surrogates(list(ranges)):
        start = lo
        for bound in _LENGTH_BOUNDS:
            if start > hi:
                break
            if start <= bound:
                end = min(hi, bound)
                yield from _split_same_length(start, end)
                start = end + 1
