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


def _mix(x: np.ndarray, seed: int) -> np.ndarray:
    """A 64-bit mixing function (splitmix64's), so that sums of mixed keys hash sets of keys."""
    x = x.astype(np.uint64) + np.uint64(seed)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _sums(label: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per label, the sum of ``values`` modulo 2^64 (four exact float64 bincounts of 16 bits each)."""
    total = np.zeros(BYTES, np.uint64)
    for shift in (0, 16, 32, 48):
        part = ((values >> np.uint64(shift)) & np.uint64(0xFFFF)).astype(np.float64)
        total += np.bincount(label, part, BYTES).astype(np.uint64) << np.uint64(shift)
    return total


def of(pieces: Sequence[FstArrays]) -> Classes:
    """The coarsest classes of bytes equivalent in every piece.

    Each byte's set of (state, destination) pairs over the pieces is hashed to 128 bits (two
    sums of mixed keys, and its size): bytes are merged when these agree, so a wrong merge
    has a probability below 2^-100. The pieces are deterministic (one arc a label and state),
    as every piece here is; in a piece with repeated arcs a byte would only stay apart.
    """
    total = sum(len(p.final) for p in pieces)
    label, key, offset = [], [], 0
    for p in pieces:
        byte = (p.ilabel > 0) & (p.ilabel < BYTES)
        key.append((p.src[byte] + offset) * total + p.nextstate[byte] + offset)
        label.append(p.ilabel[byte])
        offset += len(p.final)
    labels, keys = np.concatenate(label).astype(np.intp), np.concatenate(key).astype(np.uint64)
    signature = np.stack([_sums(labels, _mix(keys, 0)), _sums(labels, _mix(keys, 0x9E3779B97F4A7C15)),
                          np.bincount(labels, minlength=BYTES).astype(np.uint64)], axis=1)
    _, first, rep = np.unique(signature[1:], axis=0, return_index=True, return_inverse=True)
    return Classes(np.concatenate(([0], first[rep.ravel()] + 1)), len(first))


def compress(a: FstArrays, classes: Classes) -> pynini.Fst:
    """``a`` with each byte renamed to its class's representative (duplicate arcs dropped)."""
    byte = (a.ilabel > 0) & (a.ilabel < BYTES)
    keep = ~byte | (classes.rep[np.where(byte, a.ilabel, 0)] == a.ilabel)
    return fst_from_arrays(len(a.final), a.start, a.final, a.src[keep], a.ilabel[keep], a.olabel[keep],
                           a.nextstate[keep])


def expand(a: FstArrays, classes: Classes) -> pynini.Fst:
    """An acceptor over representatives as one over bytes: each arc copied to its class's members."""
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
    return fst_from_arrays(len(a.final), a.start, a.final, a.src[arc], out, out, a.nextstate[arc])
