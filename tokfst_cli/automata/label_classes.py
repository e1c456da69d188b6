"""Byte classes: determinization and minimization over an alphabet compressed by equivalence.

Two byte labels are equivalent over a set of automata when every state of each has the
same destinations on both. Renaming each label to its class's representative commutes with
replacement, determinization and minimization (the labels of a class are interchangeable on
every path), so OpenFst can run on one label a class and the result be expanded afterwards:
each class arc copied to every member. JSON texts need this: the body of a string has an arc
for nearly every byte, while a schema's literals split the bytes into some 40-80 classes (the
byte classes of lexer generators and RE2). Bytes are labels 1-256 as in stage A; other labels
(placeholders, epsilon) are their own class.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pynini

from tokfst_cli.automata.arrays import FstArrays, fst_from_arrays

BYTES = 257  # labels below this are bytes (0, epsilon, is never a member of a class)


class Classes(NamedTuple):
    """``rep[label]`` (labels 0-256): the smallest byte equivalent to it; ``count``: the classes."""

    rep: np.ndarray
    count: int

    @property
    def trivial(self) -> bool:
        """Nothing to gain: nearly one class a byte."""
        return self.count > BYTES // 2


def identity() -> Classes:
    """Every byte its own class (an automaton left over bytes)."""
    return Classes(np.arange(BYTES), BYTES - 1)


def of(pieces: Sequence[FstArrays]) -> Classes:
    """The coarsest classes of bytes equivalent in every piece.

    Two bytes are equivalent when they label the same set of (state, destination) pairs, piece
    by piece: each byte's set is summed into a 64-bit signature (splitmix64 of each pair, added
    mod 2^64), bytes are grouped by signature and arc count, and each byte's sorted pairs are
    then compared with its representative's, so a collision of signatures is caught (the
    grouping is then made again exactly, one byte at a time).
    """
    offsets = np.cumsum([0, *(len(p.final) for p in pieces)])
    src = np.concatenate([p.src + o for p, o in zip(pieces, offsets)]).astype(np.int64)
    dst = np.concatenate([p.nextstate + o for p, o in zip(pieces, offsets)]).astype(np.int64)
    label = np.concatenate([p.ilabel for p in pieces]).astype(np.int64)
    byte = (label > 0) & (label < BYTES)
    order = np.lexsort((dst[byte], src[byte], label[byte]))  # by byte, then pair: each byte's set in order
    src, dst, label = src[byte][order], dst[byte][order], label[byte][order]
    pairs = src << 32 | dst
    bounds = np.searchsorted(label, np.arange(BYTES + 1))
    count = np.diff(bounds)[1:]  # arcs of bytes 1-256
    sums = np.concatenate([np.zeros(1, np.uint64), np.cumsum(_mix(pairs), dtype=np.uint64)])
    signature = _mix((sums[bounds[2:]] - sums[bounds[1:-1]]) ^ count.astype(np.uint64))
    _, first, group = np.unique(signature, return_index=True, return_inverse=True)
    rep = np.arange(BYTES)
    rep[1:] = first[group] + 1  # the smallest byte of each group
    arc = np.arange(len(label))
    mirror = arc - bounds[label] + bounds[rep[label]]  # the same arc of the representative's list
    if (count[rep[1:] - 1] == count).all() and (pairs[mirror] == pairs).all():
        return Classes(rep, len(first))
    return _exact(pairs, bounds)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise (uint64, wrapping)."""
    x = x.astype(np.uint64)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _exact(pairs: np.ndarray, bounds: np.ndarray) -> Classes:
    """:func:`of`'s grouping made byte by byte (after a collision of signatures)."""
    rep = np.arange(BYTES)
    first: dict[bytes, int] = {}  # a byte's pairs -> the first byte with them
    for b in range(1, BYTES):
        rep[b] = first.setdefault(pairs[bounds[b]:bounds[b + 1]].tobytes(), b)
    return Classes(rep, len(first))


def compress(a: FstArrays, classes: Classes) -> pynini.Fst:
    """``a`` with each byte renamed to its class's representative (duplicate arcs dropped)."""
    byte = (a.ilabel > 0) & (a.ilabel < BYTES)
    keep = ~byte | (classes.rep[np.where(byte, a.ilabel, 0)] == a.ilabel)
    return fst_from_arrays(len(a.final), a.start, a.final, a.src[keep], a.ilabel[keep], a.olabel[keep],
                           a.nextstate[keep])


def expand(a: FstArrays, classes: Classes) -> FstArrays:
    """An acceptor over representatives as one over bytes: each arc copied to its class's members
    (in place of each arc, its class's bytes in order)."""
    rep = classes.rep
    members = np.argsort(rep, kind="stable")  # the bytes grouped by class, each class in order
    first = np.searchsorted(rep[members], np.arange(BYTES))
    size = np.bincount(rep, minlength=BYTES)
    byte = (a.ilabel > 0) & (a.ilabel < BYTES)
    label = np.where(byte, a.ilabel, 0)
    copies = np.where(byte, size[label], 1)
    arc = np.repeat(np.arange(len(label)), copies)
    within = np.arange(len(arc)) - np.repeat(np.cumsum(copies) - copies, copies)
    out = np.where(byte[arc], members[first[label[arc]] + within], a.ilabel[arc])
    return FstArrays(a.start, a.final, a.src[arc], out, out, a.nextstate[arc])


class Classed(NamedTuple):
    """A deterministic acceptor over representatives (``arrays``) and the classes they stand for:
    the acceptor over bytes that :func:`expand` makes of it, kept compressed."""

    arrays: FstArrays
    classes: Classes

    def expand(self) -> FstArrays:
        return expand(self.arrays, self.classes)
