"""OpenFst files: sealed writes, structural checks before OpenFst reads, and the cache of built automata.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import pynini

from tokfst_cli.errors import InputError
from tokfst_cli.support import cache
from tokfst_cli.support.cache import cache_dir
from tokfst_cli.support.files import (
    cut_seal,
    quiet_native_stderr,
    read_input,
    seal,
    unseal,
    write_bytes,
)
from tokfst_cli.support.kinds import FST_MAGIC, OPENFST_HEAD, describe


def fst_bytes(fst: pynini.Fst, sealed: bool = True) -> bytes:
    """The binary OpenFst serialization (vector format), sealed unless ``sealed=False``."""
    with tempfile.TemporaryDirectory(prefix="tokfst-") as d:
        p = os.path.join(d, "x.fst")
        fst.write(p)
        data = Path(p).read_bytes()
    return seal(data) if sealed else data


def write_fst(out: str | None, fst: pynini.Fst, final: bool = False) -> None:
    """A sealed OpenFst file to OUT (see :func:`write_bytes`, and its ``final``)."""
    write_bytes(out, fst_bytes(fst), final)


FST_FIX = "give a .fst written by tokfst or OpenFst"


def read_fst(src: str, fix: str = FST_FIX) -> pynini.Fst:
    """Read an OpenFst file (or '-' for stdin), with a one-line error for anything else (another
    tokfst artifact named by its kind: ``kinds.describe``)."""
    return parse_fst(read_input(src, "OpenFst file", fix), src, fix)


def parse_fst(data: bytes, source: str, fix: str = FST_FIX, hint: str | None = None) -> pynini.Fst:
    """An Fst from a file's bytes: a sealed file is verified, an unsealed one checked structurally."""
    body, verdict = unseal(data)
    kind = None if body.startswith(OPENFST_HEAD) else describe(body)
    if kind is not None:
        raise InputError(f"{source} is {kind}, not an OpenFst file", fix, hint=hint)
    if verdict is False:
        raise InputError(f"{source} is truncated or damaged (checksum mismatch)", fix, hint=hint)
    if verdict is None:
        body = check_openfst(body, source, fix, hint)
    try:
        with quiet_native_stderr():
            fst = pynini.Fst.read_from_string(body)
            ok = verdict or fst.verify()
    except (pynini.FstIOError, pynini.FstOpError, RuntimeError, MemoryError):
        raise InputError(f"{source} is not a readable OpenFst file", fix, hint=hint) from None
    if not ok:
        raise InputError(f"{source} is not a valid OpenFst file (damaged: bad state or label)", fix, hint=hint)
    return fst



_SYMBOLS_MAGIC = 2125658996


_VECTOR_VERSION = 2


_PROPS_EXPANDED_MUTABLE = 0x3


_WEIGHT_SIZE = {"standard": 4, "log": 4, "log64": 8}


def check_openfst(data: bytes, source: str, fix: str = FST_FIX, hint: str | None = None) -> bytes:
    """Refuse what would make OpenFst abort (huge counts, overlong strings); the bytes to read.

    Walks the header, symbol tables and states of a vector FST without building anything and
    returns the bytes with the stored properties reset to "unknown", so a damaged property
    word cannot mislead OpenFst's algorithms (they are recomputed on demand).
    """
    def bad(why: str) -> InputError:
        return InputError(f"{source} is not a readable OpenFst file ({why})", fix, hint=hint)

    n = len(data)
    pos = 0

    def take(fmt: str) -> tuple:
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > n:
            raise bad("truncated")
        out = struct.unpack_from(fmt, data, pos)
        pos += size
        return out

    def string() -> bytes:
        nonlocal pos
        (length,) = take("<i")
        if length < 0 or pos + length > n:
            raise bad("truncated or damaged string")
        pos += length
        return data[pos - length:pos]

    def symbols() -> None:
        nonlocal pos
        if take("<i")[0] != _SYMBOLS_MAGIC:
            raise bad("damaged symbol table")
        string()
        take("<q")
        (size,) = take("<q")
        if size < 0 or size > (n - pos) // 12:  # more symbols than bytes left
            raise bad("truncated or damaged symbol table")
        for _ in range(size):
            (length,) = struct.unpack_from("<i", data, pos) if pos + 4 <= n else (-1,)
            if length < 0 or pos + 4 + length + 8 > n:
                raise bad("truncated or damaged symbol table")
            pos += 4 + length + 8

    if n < 4 or take("<i")[0] != FST_MAGIC:
        raise bad("no OpenFst header")
    fst_type, arc_type = string(), string()
    version, flags = take("<ii")
    props_at = pos
    _, start, num_states, _ = take("<Qqqq")
    if fst_type != b"vector":
        raise InputError(f"{source} is a {fst_type.decode('ascii', 'replace')!r} FST; tokfst reads vector FSTs",
                         "convert it to a vector FST with fstconvert", hint=hint)
    weight = _WEIGHT_SIZE.get(arc_type.decode("ascii", "replace"))
    if weight is None:
        raise bad(f"arc type {arc_type.decode('ascii', 'replace')!r}")
    if version < _VECTOR_VERSION or flags & ~0x7:
        raise bad("unknown version or flags")
    if flags & 1:
        symbols()
    if flags & 2:
        symbols()
    if num_states < -1 or num_states > (n - pos) // (weight + 8):
        raise bad("truncated or damaged state count")
    if not -1 <= start < max(num_states, 0) and not (num_states == -1 and start >= -1):
        raise bad("damaged start state")
    arc = 12 + weight
    states = 0
    while (states < num_states) if num_states >= 0 else (pos < n):
        if pos + weight + 8 > n:
            raise bad("truncated")
        (narcs,) = struct.unpack_from("<q", data, pos + weight)
        pos += weight + 8
        if narcs < 0 or narcs > (n - pos) // arc:
            raise bad("truncated or damaged arc count")
        pos += narcs * arc
        states += 1
    if cut_seal(data[pos:]):  # tokfst's file, its seal cut short (a copy or download stopped)
        raise InputError(f"{source} is truncated (its tokfst seal is cut short)", fix, hint=hint)
    out = bytearray(data[:pos])
    struct.pack_into("<Q", out, props_at, _PROPS_EXPANDED_MUTABLE)
    return bytes(out)


_LOADED: OrderedDict[tuple, pynini.Fst] = OrderedDict()  # cache file identity -> its automaton


LOADED_MAX = 8


CACHE_VERSION = 2  # of cached automata, bumped when what is made of a tokenizer changes (2: non-special added tokens)


def cached_fst(name: str, build: Callable[[], pynini.Fst]) -> pynini.Fst:
    """Load ``name`` from the cache, or build it and store it (a damaged entry is rebuilt).

    The last :data:`LOADED_MAX` automata read or written stay in memory, keyed by the cache
    file's identity (path, inode, size, mtime): a process that builds many constraints reads T
    once (GPT-2's: 80 ms), and an entry replaced, damaged or cleared on disk is read again. The
    caller gets a copy (OpenFst's copy-on-write: 1 µs), so mutating it leaves the memo intact."""
    path = cache_dir() / f"v{CACHE_VERSION}-{name}.fst"
    key = cache.identity(path)
    if key in _LOADED:
        _LOADED.move_to_end(key)
        return _LOADED[key].copy()
    data = cache.load(path)
    fst = None
    if data is not None:
        try:
            with quiet_native_stderr():
                fst = pynini.Fst.read_from_string(data)
        except pynini.FstIOError:
            pass
    if fst is None:
        fst = build()
        cache.store(path, fst_bytes(fst))
        key = cache.identity(path)
    if key is not None:
        _LOADED[key] = fst
        while len(_LOADED) > LOADED_MAX:
            _LOADED.popitem(last=False)
        return fst.copy()
    return fst
