"""Reading and writing every stage's outputs: atomic writes, the on-disk cache, OpenFst files, containers.

Nothing is ever half-written: data goes to a temporary file beside the target and is renamed
into place. Cached artifacts live under ``$XDG_CACHE_HOME/tokfst`` (``TOKFST_CACHE`` overrides)
and are named by tokenizer fingerprint and format version.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pynini

from .errors import InputError, TokfstError

FORMAT_VERSION = 1


def cache_dir() -> Path:
    root = os.environ.get("TOKFST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tokfst")
    return Path(root)


def atomic_write(path: str | os.PathLike, writer: Callable[[str], None]) -> None:
    """Call ``writer(tmp_path)`` and rename the result onto ``path``; remove it on failure."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise TokfstError(f"cannot write {path}: {e.strerror or e}", "check the directory and permissions") from None
    os.close(fd)
    try:
        writer(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes(out: str | None, data: bytes) -> None:
    """Write to OUT atomically, or to stdout when OUT is None or '-'."""
    if out in (None, "-"):
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    atomic_write(out, lambda tmp: Path(tmp).write_bytes(data))


def fst_bytes(fst: pynini.Fst) -> bytes:
    """The binary OpenFst serialization (vector format)."""
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x.fst")
        fst.write(p)
        return Path(p).read_bytes()


def write_fst(out: str | None, fst: pynini.Fst) -> None:
    if out in (None, "-"):
        write_bytes(out, fst_bytes(fst))
    else:
        atomic_write(out, lambda tmp: fst.write(tmp))


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


def read_fst(src: str) -> pynini.Fst:
    """Read an OpenFst file (or '-' for stdin), with a one-line error for anything else."""
    try:
        if src == "-":
            data = sys.stdin.buffer.read()
            with tempfile.TemporaryDirectory() as d:
                p = os.path.join(d, "in.fst")
                Path(p).write_bytes(data)
                with quiet_native_stderr():
                    return pynini.Fst.read(p)
        if not os.path.isfile(src):
            raise InputError(f"no such file: {src}", "give an existing .fst file")
        with quiet_native_stderr():
            return pynini.Fst.read(src)
    except pynini.FstIOError:
        raise InputError(f"{src} is not a readable OpenFst file", "give a .fst written by tokfst or OpenFst") from None


def cached_fst(name: str, build: Callable[[], pynini.Fst]) -> pynini.Fst:
    """Load ``name`` from the cache, or build it and store it (a corrupt entry is rebuilt)."""
    path = cache_dir() / f"v{FORMAT_VERSION}-{name}.fst"
    if path.exists():
        try:
            with quiet_native_stderr():
                return pynini.Fst.read(str(path))
        except pynini.FstIOError:
            pass
    fst = build()
    try:
        atomic_write(path, lambda tmp: fst.write(tmp))
    except TokfstError:
        pass  # an unwritable cache only costs time
    return fst


def pack(magic: bytes, header: dict, body: bytes) -> bytes:
    """A tokfst container: magic, u32 header length, JSON header (with the body's sha256), body."""
    h = json.dumps({**header, "sha256": hashlib.sha256(body).hexdigest()}, sort_keys=True).encode()
    return magic + struct.pack("<I", len(h)) + h + body


def read_artifact(path: str, hint: str | None = None) -> bytes:
    """An artifact's bytes; InputError naming the path when it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}", "give a readable artifact file",
                         hint=hint) from None


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
    except (ValueError, UnicodeDecodeError):
        raise error(f"{source} has a damaged header (truncated?)") from None
    if header.get("format") != fmt or header.get("version") != version:
        raise error(f"{source} has format {header.get('format')} v{header.get('version')}, "
                    f"expected {fmt} v{version}")
    body = data[start + hlen:]
    if hashlib.sha256(body).hexdigest() != header.get("sha256"):
        raise error(f"{source} is truncated or damaged (checksum mismatch)")
    return header, body


_FST_MAGIC = 2125659606
_VECTOR_VERSION = 2
_PROPS_EXPANDED_MUTABLE = 0x3


def fst_from_arrays(num_states: int, start: int, finals: np.ndarray, src: np.ndarray, ilabel: np.ndarray,
                    olabel: np.ndarray, dst: np.ndarray) -> pynini.Fst:
    """A standard-arc VectorFst built in bulk from arc arrays (unweighted).

    pynini has no bulk constructor and ``add_arc`` costs ~0.7 µs per arc from Python, so this
    writes OpenFst's own binary vector format (FstHeader, then per state its final weight,
    arc count and 16-byte arcs) with numpy and lets OpenFst read it. ``finals`` is a bool mask.
    """
    order = np.argsort(src, kind="stable")
    src, ilabel, olabel, dst = src[order], ilabel[order], olabel[order], dst[order]
    counts = np.bincount(src, minlength=num_states).astype(np.int64)
    header = struct.pack("<i", _FST_MAGIC)
    for s in (b"vector", b"standard"):
        header += struct.pack("<i", len(s)) + s
    header += struct.pack("<iiQqqq", _VECTOR_VERSION, 0, _PROPS_EXPANDED_MUTABLE, start, num_states, 0)
    arcs = np.zeros(len(src), [("il", "<i4"), ("ol", "<i4"), ("w", "<f4"), ("next", "<i4")])
    arcs["il"], arcs["ol"], arcs["next"] = ilabel, olabel, dst
    raw = arcs.tobytes()
    ends = np.cumsum(counts) * 16
    parts = [header]
    begin = 0
    for final, n, end in zip(finals.tolist(), counts.tolist(), ends.tolist()):
        parts.append(struct.pack("<fq", 0.0 if final else float("inf"), n))
        parts.append(raw[begin:end])
        begin = end
    return pynini.Fst.read_from_string(b"".join(parts))

