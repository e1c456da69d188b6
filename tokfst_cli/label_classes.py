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

from .artifacts import FstArrays, fst_from_arrays

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

    Exact for deterministic pieces (every piece here): a byte's arcs, stably sorted by byte,
    list its (state, destination) pairs piece by piece in state order, one a state, so equal
    lists are equal behaviours. In a piece with several arcs of one byte at a state, the
    order of those arcs counts too: two bytes may then stay apart, never wrongly merged.
    """
    offsets = np.cumsum([0, *(len(p.final) for p in pieces)])
    src = np.concatenate([p.src + o for p, o in zip(pieces, offsets)]).astype(np.int64)
    dst = np.concatenate([p.nextstate + o for p, o in zip(pieces, offsets)]).astype(np.int64)
    label = np.concatenate([p.ilabel for p in pieces]).astype(np.int64)
    byte = (label > 0) & (label < BYTES)
    src, dst, label = src[byte], dst[byte], label[byte]
    order = np.argsort(label.astype(np.uint16), kind="stable")  # arcs come by state: (byte, state) order
    pairs = np.stack([src[order], dst[order]], 1)
    bounds = np.searchsorted(label[order], np.arange(BYTES + 1))
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
