"""Files that are never half-written: output destinations, atomic writes, seals and containers.

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
``$XDG_CACHE_HOME/tokfst`` (``TOKFST_CACHE`` overrides; :mod:`tokfst_cli.support.cache`) and are
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tokfst_cli.errors import InputError, TokfstError

FORMAT_VERSION = 1


SEAL_MAGIC = b"TOKFSTSUM1"


SEAL_SIZE = len(SEAL_MAGIC) + 32


def seal(data: bytes) -> bytes:
    """``data`` followed by the seal: ``TOKFSTSUM1`` and sha256(data)."""
    return data + SEAL_MAGIC + hashlib.sha256(data).digest()


def cut_seal(tail: bytes) -> bool:
    """Is ``tail`` (what follows a complete OpenFst structure) the start of a seal cut short: a
    file of tokfst's truncated within its last 42 bytes, not an OpenFst file of another tool?"""
    return 0 < len(tail) < SEAL_SIZE and (tail[:len(SEAL_MAGIC)] == SEAL_MAGIC[:len(tail)])


def unseal(data: bytes) -> tuple[bytes, bool | None]:
    """(content, verdict): True = a seal that verifies, False = a seal that does not, None = no seal."""
    if len(data) >= SEAL_SIZE and data[-SEAL_SIZE:-32] == SEAL_MAGIC:
        body = data[:-SEAL_SIZE]
        return body, hashlib.sha256(body).digest() == data[-32:]
    return data, None


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


def write_bytes(out: str | os.PathLike | None, data: bytes, final: bool = False) -> None:
    """Write ``data`` to OUT (see :func:`destination`): stdout for None or '-'. ``final``: the
    command's output, put in place through :func:`on_commit`'s hook."""
    dest = destination(out)
    if dest.kind == "file":
        _replace(dest.path, os.fspath(out), lambda tmp: Path(tmp).write_bytes(data), final)
    else:
        _write_in_place(dest, os.fspath(out) if out is not None else "-", data)
        if final and _COMMIT is not None:
            _COMMIT(lambda: None)  # written in place: nothing to rename, but the output is complete


_COMMIT: Callable[[Callable[[], None]], None] | None = None


def on_commit(hook: Callable[[Callable[[], None]], None] | None) -> None:
    """Put the command's output in place (``write_bytes(..., final=True)``) by calling
    ``hook(rename)`` instead of ``rename()``: the supervisor's child (:mod:`.guard`) renames
    under a lock its time limit also takes, so the limit ends the command either before the
    rename (an existing file untouched) or not at all. None: rename directly."""
    global _COMMIT
    _COMMIT = hook


def temp_prefix(name: str, pid: int | None = None) -> str:
    """The prefix of the temporary files written beside ``name`` by process ``pid``."""
    return f".{name}.{os.getpid() if pid is None else pid}."


def _replace(target: str, shown: str, writer: Callable[[str], None], final: bool = False) -> None:
    parent = os.path.dirname(target) or "."
    name = os.path.basename(target)
    try:
        os.makedirs(parent, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(name), suffix=".tmp", dir=parent)
    except OSError as e:
        if e.errno in _FULL:
            raise write_error(e, shown) from None
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
            if final and _COMMIT is not None:
                _COMMIT(lambda: os.replace(tmp, target))
            else:
                os.replace(tmp, target)
        except OSError as e:
            raise write_error(e, shown) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_FULL = {  # errno -> what failed, the fix: writes that fail for want of room (or a device's fault)
    errno.ENOSPC: ("no space left on device", "free some space, or write elsewhere"),
    errno.EDQUOT: ("disk quota exceeded", "free some space, or write elsewhere"),
    errno.EFBIG: ("file too large", "write elsewhere"),
    errno.EIO: ("input/output error", "check the device, or write elsewhere"),
}


def write_error(e: OSError, shown: str) -> TokfstError:
    """A failed write of ``shown`` (a path, or "standard output") in one line, exit 1: "no space
    left on device writing OUT" (a full disk, a quota, a file too large, an I/O error), else
    "cannot write OUT: " and the system's words."""
    if e.errno in _FULL:
        what, fix = _FULL[e.errno]
        return TokfstError(f"{what} writing {shown}", fix)
    return TokfstError(f"cannot write {shown}: {e.strerror or e}", "check free space and permissions")


def _write_in_place(dest: Destination, shown: str, data: bytes) -> None:
    if dest.kind == "stdout":
        try:
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise write_error(e, "standard output") from None
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
        raise write_error(e, shown) from None
    finally:
        if dest.kind == "device":
            os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


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
