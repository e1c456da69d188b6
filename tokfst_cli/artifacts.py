"""Reading and writing every stage's outputs: atomic writes, the on-disk cache, OpenFst files, containers.

Nothing is ever half-written. An output path is resolved first (:func:`destination`): ``-``
(or None) and ``/dev/stdout`` are standard output; ``/dev/stderr``, ``/dev/fd/N`` and
``/proc/self/fd/N`` are that open descriptor; a path that exists and is not a regular file
(a FIFO, a character device such as ``/dev/null``) is opened and written in place, never
renamed over; a regular file, or a new one, gets the data in a temporary file
``.NAME.PID.XXXXXXXX.tmp`` beside it, renamed into place (a symlink is followed: its target
is replaced and the link kept). A directory is refused.

Integrity: tokfst's ``.fst`` files and cache entries end with a *seal* (``TOKFSTSUM1`` and
the sha256 of everything before it), which OpenFst's tools ignore; a sealed file is verified
on read. Unsealed OpenFst files (from other tools) are checked structurally before OpenFst
sees them, so a damaged one is refused instead of crashing the process. Containers
(:func:`pack`) carry a checksum over header and body. Cached artifacts live under
``$XDG_CACHE_HOME/tokfst`` (``TOKFST_CACHE`` overrides; :mod:`tokfst_cli.cache`) and are
named by tokenizer fingerprint and format version.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import struct
import sys
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple
from pathlib import Path

import numpy as np
import pynini
import pywrapfst

from .errors import InputError, TokfstError

FORMAT_VERSION = 1

SEAL_MAGIC = b"TOKFSTSUM1"
SEAL_SIZE = len(SEAL_MAGIC) + 32


def cache_dir() -> Path:
    """The cache directory (see :func:`tokfst_cli.cache.cache_dir`)."""
    from .cache import cache_dir as _cache_dir

    return _cache_dir()


# ---- seals ---------------------------------------------------------------------------------------
def seal(data: bytes) -> bytes:
    """``data`` followed by the seal: ``TOKFSTSUM1`` and sha256(data)."""
    return data + SEAL_MAGIC + hashlib.sha256(data).digest()


def unseal(data: bytes) -> tuple[bytes, bool | None]:
    """(content, verdict): True = a seal that verifies, False = a seal that does not, None = no seal."""
    if len(data) >= SEAL_SIZE and data[-SEAL_SIZE:-32] == SEAL_MAGIC:
        body = data[:-SEAL_SIZE]
        return body, hashlib.sha256(body).digest() == data[-32:]
    return data, None


# ---- output destinations -------------------------------------------------------------------------
@dataclass(frozen=True)
class Destination:
    """Where OUT goes: ``stdout``, an open ``fd``, a ``device`` written in place, or a regular ``file``."""

    kind: str
    path: str = ""  # device: the path to open; file: the real target (symlinks resolved)
    fd: int = -1


_FD_PATH = re.compile(r"/dev/fd/(?P<fd>\d+)|/proc/(?P<pid>self|thread-self|\d+)/fd/(?P<pfd>\d+)")


def destination(out: str | os.PathLike | None) -> Destination:
    """Resolve OUT; InputError for a directory or a path that cannot be a file."""
    if out is None or os.fspath(out) == "-":
        return Destination("stdout")
    path = os.fspath(out)
    norm = os.path.normpath(os.path.abspath(path))
    if norm == "/dev/stdout":
        return Destination("stdout")
    if norm == "/dev/stderr":
        return Destination("fd", path, 2)
    m = _FD_PATH.fullmatch(norm)
    if m and m.group("pid") not in (None, "self", "thread-self") and int(m.group("pid")) != os.getpid():
        m = None  # another process's descriptor: an ordinary path
    if m:
        fd = int(m.group("fd") or m.group("pfd"))
        return Destination("stdout") if fd == 1 else Destination("fd", path, fd)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}", "give a writable file path") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path} is a directory", "give a file name for the output")
    if st is not None and not stat.S_ISREG(st.st_mode):
        return Destination("device", path)
    target = os.path.realpath(path) if os.path.islink(path) else path
    if target.startswith(("/proc/", "/dev/fd/")):  # a descriptor's magic link: never rename over it
        return Destination("device", path)
    return Destination("file", target)


def atomic_write(path: str | os.PathLike, writer: Callable[[str], None]) -> None:
    """Call ``writer(tmp_path)`` and put the result at ``path`` (see :func:`destination`).

    A regular file is replaced by renaming (a symlink keeps its link); stdout, descriptors,
    FIFOs and devices get the bytes written in place. The temporary file is removed on failure.
    """
    dest = destination(path)
    if dest.kind != "file":
        with tempfile.TemporaryDirectory(prefix="tokfst-") as d:
            tmp = os.path.join(d, "out")
            writer(tmp)
            _write_in_place(dest, os.fspath(path), Path(tmp).read_bytes())
        return
    _replace(dest.path, os.fspath(path), writer)


def write_bytes(out: str | os.PathLike | None, data: bytes) -> None:
    """Write ``data`` to OUT (see :func:`destination`): stdout for None or '-'."""
    dest = destination(out)
    if dest.kind == "file":
        _replace(dest.path, os.fspath(out), lambda tmp: Path(tmp).write_bytes(data))
    else:
        _write_in_place(dest, os.fspath(out) if out is not None else "-", data)


def temp_prefix(name: str, pid: int | None = None) -> str:
    """The prefix of the temporary files written beside ``name`` by process ``pid``."""
    return f".{name}.{os.getpid() if pid is None else pid}."


def _replace(target: str, shown: str, writer: Callable[[str], None]) -> None:
    parent = os.path.dirname(target) or "."
    name = os.path.basename(target)
    try:
        os.makedirs(parent, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(name), suffix=".tmp", dir=parent)
    except OSError as e:
        raise InputError(f"cannot write {shown}: {e.strerror or e}",
                         "check that its directory exists and is writable") from None
    os.close(fd)
    try:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except OSError:
            mode = 0o666 & ~_UMASK
        try:
            writer(tmp)
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except OSError as e:
            raise TokfstError(f"cannot write {shown}: {e.strerror or e}",
                              "check free space and permissions") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_in_place(dest: Destination, shown: str, data: bytes) -> None:
    if dest.kind == "stdout":
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    try:
        fd = dest.fd if dest.kind == "fd" else os.open(dest.path, os.O_WRONLY | os.O_NOCTTY)
    except OSError as e:
        raise InputError(f"cannot write {shown}: {e.strerror or e}", "give a writable file path") from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BrokenPipeError:
        raise
    except OSError as e:
        if e.errno == errno.EBADF:
            raise InputError(f"cannot write {shown}: the descriptor is not open", "give a file path") from None
        raise TokfstError(f"cannot write {shown}: {e.strerror or e}", "check the device") from None
    finally:
        if dest.kind == "device":
            os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


# ---- OpenFst files -------------------------------------------------------------------------------
def fst_bytes(fst: pynini.Fst, sealed: bool = True) -> bytes:
    """The binary OpenFst serialization (vector format), sealed unless ``sealed=False``."""
    with tempfile.TemporaryDirectory(prefix="tokfst-") as d:
        p = os.path.join(d, "x.fst")
        fst.write(p)
        data = Path(p).read_bytes()
    return seal(data) if sealed else data


def write_fst(out: str | None, fst: pynini.Fst) -> None:
    """A sealed OpenFst file to OUT (see :func:`write_bytes`)."""
    write_bytes(out, fst_bytes(fst))


@contextlib.contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Silence OpenFst's own log lines (fd 2) while it reads, so errors stay one line."""
    sys.stderr.flush()
    try:
        saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    except OSError:
        yield
        return
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def read_input(src: str, what: str, fix: str, hint: str | None = None) -> bytes:
    """The bytes of an input path ('-' = stdin); InputError naming the path when it cannot be read."""
    try:
        if src == "-":
            return sys.stdin.buffer.read()
        return Path(src).read_bytes()
    except OSError as e:
        reason = "no such file" if isinstance(e, FileNotFoundError) else (e.strerror or str(e))
        raise InputError(f"cannot read {what} {src}: {reason}", fix, hint=hint) from None


FST_FIX = "give a .fst written by tokfst or OpenFst"


def read_fst(src: str) -> pynini.Fst:
    """Read an OpenFst file (or '-' for stdin), with a one-line error for anything else."""
    return parse_fst(read_input(src, "OpenFst file", FST_FIX), src)


def parse_fst(data: bytes, source: str, fix: str = FST_FIX, hint: str | None = None) -> pynini.Fst:
    """An Fst from a file's bytes: a sealed file is verified, an unsealed one checked structurally."""
    body, verdict = unseal(data)
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


FST_MAGIC = 2125659606
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
        if size < 0 or size > (n - pos) // 12:
            raise bad("damaged symbol table")
        for _ in range(size):
            (length,) = struct.unpack_from("<i", data, pos) if pos + 4 <= n else (-1,)
            if length < 0 or pos + 4 + length + 8 > n:
                raise bad("damaged symbol table")
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
        raise bad("damaged state count")
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
    out = bytearray(data[:pos])
    struct.pack_into("<Q", out, props_at, _PROPS_EXPANDED_MUTABLE)
    return bytes(out)


# ---- the cache -----------------------------------------------------------------------------------
_LOADED: OrderedDict[tuple, pynini.Fst] = OrderedDict()  # cache file identity -> its automaton
LOADED_MAX = 8


def cached_fst(name: str, build: Callable[[], pynini.Fst]) -> pynini.Fst:
    """Load ``name`` from the cache, or build it and store it (a damaged entry is rebuilt).

    The last :data:`LOADED_MAX` automata read or written stay in memory, keyed by the cache
    file's identity (path, inode, size, mtime): a process that builds many constraints reads T
    once (GPT-2's: 80 ms), and an entry replaced, damaged or cleared on disk is read again. The
    caller gets a copy (OpenFst's copy-on-write: 1 µs), so mutating it leaves the memo intact."""
    from . import cache

    path = cache_dir() / f"v{FORMAT_VERSION}-{name}.fst"
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


# ---- containers ----------------------------------------------------------------------------------
def _checksum(header: dict, body: bytes) -> str:
    """sha256 over the canonical header (without its checksum fields) and the body."""
    rest = {k: v for k, v in header.items() if k not in ("sha256", "checksum")}
    h = hashlib.sha256(json.dumps(rest, sort_keys=True).encode())
    h.update(body)
    return h.hexdigest()


def pack(magic: bytes, header: dict, body: bytes) -> bytes:
    """A tokfst container: magic, u32 header length, JSON header, body.

    The header carries ``sha256`` (of the body) and ``checksum`` (of the header's other fields
    and the body), so a changed header field is detected as surely as a damaged body.
    """
    header = {**header, "sha256": hashlib.sha256(body).hexdigest()}
    header["checksum"] = _checksum(header, body)
    h = json.dumps(header, sort_keys=True).encode()
    return magic + struct.pack("<I", len(h)) + h + body


def read_artifact(path: str, hint: str | None = None) -> bytes:
    """An artifact's bytes; InputError naming the path when it cannot be read."""
    return read_input(path, "artifact", "give a readable artifact file", hint=hint)


def unpack(data: bytes, magic: bytes, fmt: str, version: int, source: str, fix: str,
           hint: str | None = None) -> tuple[dict, bytes]:
    """Header and body of a container; InputError for another format, a damaged or truncated file."""
    def error(message: str) -> InputError:
        return InputError(message, fix, hint=hint)

    if not data.startswith(magic) or len(data) < len(magic) + 4:
        raise error(f"{source} is not a {fmt} file")
    (hlen,) = struct.unpack_from("<I", data, len(magic))
    start = len(magic) + 4
    try:
        header = json.loads(data[start:start + hlen])
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise error(f"{source} has a damaged header (truncated?)") from None
    if not isinstance(header, dict):
        raise error(f"{source} has a damaged header")
    if header.get("format") != fmt or header.get("version") != version:
        raise error(f"{source} has format {str(header.get('format'))[:40]} v{str(header.get('version'))[:10]}, "
                    f"expected {fmt} v{version}")
    body = data[start + hlen:]
    if hashlib.sha256(body).hexdigest() != header.get("sha256"):
        raise error(f"{source} is truncated or damaged (checksum mismatch)")
    if "checksum" in header and header["checksum"] != _checksum(header, body):
        raise error(f"{source} has a damaged header (checksum mismatch)")
    return header, body


_ARC = np.dtype([("ilabel", "<i4"), ("olabel", "<i4"), ("weight", "<f4"), ("nextstate", "<i4")])
_CONST_STATE = np.dtype([("final", "<f4"), ("pos", "<u4"), ("narcs", "<u4"), ("niepsilons", "<u4"),
                         ("noepsilons", "<u4")])
_CONST_VERSION = 2  # ConstFst's unaligned file version
_PROPS_EXPANDED = 0x1


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
        raise ValueError(f"fst_arrays reads 32-bit weights, not {fst.arc_type()} arcs")
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
        raise ValueError(f"unexpected ConstFst header flags {flags}")
    pos += struct.calcsize("<iiQqqq")
    states = np.frombuffer(data, _CONST_STATE, num_states, pos)
    arcs = np.frombuffer(data, _ARC, num_arcs, pos + _CONST_STATE.itemsize * num_states)
    src = np.repeat(np.arange(num_states, dtype=np.int64), states["narcs"].astype(np.int64))
    final = states["final"] != np.float32(np.inf)
    weighted = bool((arcs["weight"] != 0).any() or (states["final"][final] != 0).any())
    return FstArrays(int(start), final, src, arcs["ilabel"].astype(np.int64), arcs["olabel"].astype(np.int64),
                     arcs["nextstate"].astype(np.int64), weighted)
