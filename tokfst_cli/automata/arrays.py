"""OpenFst automata as numpy arc arrays and back, in bulk (the ConstFst file layout, no Python loop per arc).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np
import pynini
import pywrapfst

from tokfst_cli.automata.fst_io import FST_MAGIC
from tokfst_cli.errors import InternalError, UsageError

_ARC = np.dtype([("ilabel", "<i4"), ("olabel", "<i4"), ("weight", "<f4"), ("nextstate", "<i4")])


_CONST_STATE = np.dtype([("final", "<f4"), ("pos", "<u4"), ("narcs", "<u4"), ("niepsilons", "<u4"),
                         ("noepsilons", "<u4")])


_CONST_VERSION = 2  # ConstFst's unaligned file version


_PROPS_EXPANDED = 0x1


def unique(x: np.ndarray) -> np.ndarray:
    """``np.unique(x)`` of a 1-D integer array, by a sort: numpy 2.4's hashing ``np.unique`` is 10 to 50
    times slower from about 10,000 elements."""
    s = np.sort(np.asarray(x).ravel())
    return s if len(s) < 2 else s[np.r_[True, s[1:] != s[:-1]]]


def fst_from_arrays(num_states: int, start: int, finals: np.ndarray, src: np.ndarray, ilabel: np.ndarray,
                    olabel: np.ndarray, dst: np.ndarray) -> pynini.Fst:
    """A standard-arc VectorFst built in bulk from arc arrays (unweighted).

    pynini has no bulk constructor and ``add_arc`` costs ~0.7 µs per arc from Python, so this
    writes OpenFst's ConstFst binary format with numpy (the layout :func:`fst_arrays` reads:
    the FstHeader, one 20-byte record per state, then every arc, 16 bytes: ilabel, olabel,
    weight 0.0 = one, nextstate) and has pynini read it into a VectorFst: the arcs are one
    contiguous read, not one stream read per field. ``finals`` is a bool mask.
    """
    src = np.asarray(src)
    ilabel, olabel, dst = np.asarray(ilabel), np.asarray(olabel), np.asarray(dst)
    if len(src) > 1 and (src[1:] < src[:-1]).any():
        order = np.argsort(src, kind="stable")
        src, ilabel, olabel, dst = src[order], ilabel[order], olabel[order], dst[order]
    counts = np.bincount(src, minlength=num_states)
    header = struct.pack("<i", FST_MAGIC)
    for s in (b"const", b"standard"):
        header += struct.pack("<i", len(s)) + s
    header += struct.pack("<iiQqqq", _CONST_VERSION, 0, _PROPS_EXPANDED, start, num_states, len(src))
    states = np.zeros(num_states, _CONST_STATE)
    states["final"] = np.where(finals, np.float32(0.0), np.float32(np.inf))
    states["narcs"] = counts
    states["pos"][1:] = np.cumsum(counts)[:-1]
    states["niepsilons"] = np.bincount(src[ilabel == 0], minlength=num_states)
    states["noepsilons"] = np.bincount(src[olabel == 0], minlength=num_states)
    arcs = np.zeros(len(src), _ARC)
    arcs["ilabel"], arcs["olabel"], arcs["nextstate"] = ilabel, olabel, dst
    return pynini.Fst.read_from_string(header + states.tobytes() + arcs.tobytes())


class FstArrays(NamedTuple):
    """An FST's arcs in bulk: ``src`` is nondecreasing (arcs grouped by state, in OpenFst's order)."""

    start: int
    final: np.ndarray  # bool per state
    src: np.ndarray
    ilabel: np.ndarray
    olabel: np.ndarray
    nextstate: np.ndarray
    weighted: bool = False  # some arc or final weight is not One (0.0): the arrays above leave weights out


def fst_from(a: FstArrays) -> pynini.Fst:
    """:func:`fst_from_arrays` of an :class:`FstArrays` (unweighted)."""
    return fst_from_arrays(len(a.final), a.start, a.final, a.src, a.ilabel, a.olabel, a.nextstate)


def fst_arrays(fst: pynini.Fst) -> FstArrays:
    """Start, finals and every arc of a standard-arc FST, read in bulk (the inverse of :func:`fst_from_arrays`).

    pynini iterates arcs at ~0.3 µs each from Python; this has OpenFst convert the FST to its
    ConstFst and write that (symbol tables left out, no alignment): a header, then one 20-byte
    record per state (final weight f32, first arc, arc count and epsilon counts as u32) and all
    arcs in state order, 16 bytes each (ilabel, olabel, weight, nextstate), read by numpy whole.
    """
    if fst.arc_type() not in ("standard", "log"):
        raise UsageError(f"fst_arrays reads 32-bit weights, not {fst.arc_type()} arcs")
    g = fst
    if fst.input_symbols() is not None or fst.output_symbols() is not None:
        g = fst.copy().set_input_symbols(None).set_output_symbols(None)
    data = pywrapfst.convert(g, "const").write_to_string()
    pos = 4
    for _ in range(2):  # fst type, arc type
        (n,) = struct.unpack_from("<i", data, pos)
        pos += 4 + n
    _, flags, _, start, num_states, num_arcs = struct.unpack_from("<iiQqqq", data, pos)
    if flags:  # symbol tables or alignment: not written for a symbol-less copy
        raise InternalError(f"unexpected ConstFst header flags {flags}")
    pos += struct.calcsize("<iiQqqq")
    states = np.frombuffer(data, _CONST_STATE, num_states, pos)
    arcs = np.frombuffer(data, _ARC, num_arcs, pos + _CONST_STATE.itemsize * num_states)
    src = np.repeat(np.arange(num_states, dtype=np.int64), states["narcs"].astype(np.int64))
    final = states["final"] != np.float32(np.inf)
    weighted = bool((arcs["weight"] != 0).any() or (states["final"][final] != 0).any())
    return FstArrays(int(start), final, src, arcs["ilabel"].astype(np.int64), arcs["olabel"].astype(np.int64),
                     arcs["nextstate"].astype(np.int64), weighted)
