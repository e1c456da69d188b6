"""The on-disk cache of built automata and tables: where it is, its entries, verification, clearing.

The cache lives in ``$TOKFST_CACHE``, else ``$XDG_CACHE_HOME/tokfst``, else ``~/.cache/tokfst``.
An entry is one file ``v<format>-<kind>-<key>.<fst|tokfst|json>`` (key: a tokenizer fingerprint
or a configuration hash), written atomically (a temporary ``.NAME.PID.XXXXXXXX.tmp`` renamed into
place) and *sealed* (:func:`tokfst_cli.support.files.seal`: ``TOKFSTSUM1`` and the sha256 of the
content; OpenFst's tools ignore it, so ``.fst`` entries stay readable by ``fstinfo``).
:func:`load` returns an entry's content only when its seal verifies; anything else (missing,
truncated, damaged, written by an older tokfst) reads as absent and the caller rebuilds and
stores it again. ``bench/`` holds the tokenizers ``tokfst bench`` trains (plain JSON).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from tokfst_cli.errors import TokfstError
from tokfst_cli.support.files import atomic_write, seal, unseal

KINDS = {  # entry name prefix -> what it holds (longest prefix first when matching)
    "lexicon": "lexicon transducer T (promote)",
    "tokenizer": "a large tokenizer.json as read (tokens, surfaces, merges), by its bytes",
    "model-lexicon": "lexicon T_M over model texts, boundary passed through (canonical BPE)",
    "pretok": "normalizer and pre-tokenizer transducer P (canonical BPE)",
    "bpe": "implicit A_BPE (compile-bpe, canonical BPE)",
    "bpe-classes": "the implicit A_BPE's token classes (its states; canonical BPE)",
    "taho": "T_Aho (compile-maxmatch, --method aho)",
    "pretables": "normalizer and pre-tokenizer tables (WordPiece P)",
    "preout": "pre-tokenized text language (WordPiece P)",
    "pre": "normalizer and pre-tokenizer transducer P (WordPiece)",
    "alltext": "text automaton of every word (WordPiece)",
    "unkwords": "words too long for WordPiece ([UNK])",
    "maxmatch-dom": "domain of the greedy MaxMatch (WordPiece)",
}
BENCH_KIND = "bench-tokenizer"
_ENTRY = re.compile(r"v\d+-(?P<rest>.+)\.(?:fst|tokfst|json)")
_BENCH = re.compile(r"bpe-[0-9a-f]+-v\d+-tokenizers.+\.json")
_TEMP = re.compile(r"\.(?P<name>v\d+-.+\.(?:fst|tokfst|json)|bpe-.+\.json)\.(?:(?P<pid>\d+)\.)?[A-Za-z0-9_]{8}\.tmp")
STALE_SECONDS = 3600  # a temporary file without a (live) writer this old is abandoned


def cache_dir() -> Path:
    root = os.environ.get("TOKFST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tokfst")
    return Path(root)


# ---- reading and writing entries -------------------------------------------------------------
_BYPASSED: ContextVar[bool] = ContextVar("tokfst_cache_bypassed", default=False)


@contextlib.contextmanager
def bypassed(on: bool = True) -> Iterator[None]:
    """Within it (when ``on``), no entry is read or written: every automaton is built afresh
    (``--no-cache``, ``pipeline.build(cache=False)``)."""
    token = _BYPASSED.set(_BYPASSED.get() or on)
    try:
        yield
    finally:
        _BYPASSED.reset(token)


def load(path: Path) -> bytes | None:
    """The content of a cache entry whose seal verifies; None when missing, damaged or bypassed."""
    if _BYPASSED.get():
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    body, verdict = unseal(data)
    return body if verdict else None


def identity(path: Path) -> tuple | None:
    """(path, inode, size, mtime) of a cache entry: it changes when the entry is rewritten;
    None when the entry is missing or the cache bypassed."""
    if _BYPASSED.get():
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    return str(path), st.st_ino, st.st_size, st.st_mtime_ns


def store(path: Path, data: bytes) -> bool:
    """Seal (unless sealed) and write an entry atomically; False when the cache is not writable
    or bypassed."""
    if _BYPASSED.get():
        return False
    if unseal(data)[1] is not True:
        data = seal(data)
    try:
        atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))
    except TokfstError:
        return False  # an unwritable cache only costs time
    with contextlib.suppress(OSError):
        prune(path.parent)
    return True


# ---- listing, clearing ---------------------------------------------------------------------------
@dataclass
class Entry:
    """One cache file: its path, name, kind, size and whether its seal (bench: its JSON) verifies."""

    path: Path
    kind: str
    size: int
    verified: bool | None = None  # None: not checked

    @property
    def name(self) -> str:
        return str(self.path.relative_to(self.path.parent.parent)) if self.kind == BENCH_KIND else self.path.name

    def record(self) -> dict:
        return {"name": self.name, "kind": self.kind, "bytes": self.size, "verified": self.verified,
                "path": str(self.path)}


def kind_of(name: str) -> str | None:
    """The kind of a cache file name (a key of :data:`KINDS`), or None if it is not tokfst's."""
    m = _ENTRY.fullmatch(name)
    if not m:
        return None
    rest = m.group("rest")
    for kind in sorted(KINDS, key=len, reverse=True):
        if rest.startswith(kind + "-"):
            return kind
    return "other"


def verify(path: Path, kind: str) -> bool:
    """Does the entry read back intact? (its seal; a bench tokenizer: valid JSON)."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    if kind == BENCH_KIND:
        try:
            json.loads(data)
            return True
        except (ValueError, UnicodeDecodeError):
            return False
    return unseal(data)[1] is True


def _files(root: Path) -> list[Path]:
    out = []
    for d in (root, root / "bench"):
        with contextlib.suppress(OSError):
            out += [p for p in d.iterdir() if p.is_file() and not p.is_symlink()]
    return sorted(out)


def entries(root: Path | None = None, check: bool = True) -> list[Entry]:
    """tokfst's entries in the cache (temporary files excluded), verified unless ``check=False``."""
    root = root or cache_dir()
    out = []
    for p in _files(root):
        kind = (BENCH_KIND if _BENCH.fullmatch(p.name) else None) if p.parent != root else kind_of(p.name)
        if kind is None:
            continue
        with contextlib.suppress(OSError):
            out.append(Entry(p, kind, p.stat().st_size, verify(p, kind) if check else None))
    return out


def temporaries(root: Path | None = None) -> list[Path]:
    """Temporary files tokfst left in the cache (a writer still at work, or killed)."""
    return [p for p in _files(root or cache_dir()) if _TEMP.fullmatch(p.name)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def prune(root: Path | None = None) -> int:
    """Remove temporary files whose writer is gone (or, without a pid, older than an hour)."""
    removed = 0
    for p in temporaries(root):
        m = _TEMP.fullmatch(p.name)
        pid = m.group("pid") if m else None
        try:
            stale = (not _alive(int(pid))) if pid else time.time() - p.stat().st_mtime > STALE_SECONDS
            if stale and int(pid or 0) != os.getpid():
                p.unlink()
                removed += 1
        except OSError:
            pass
    return removed


def clear(root: Path | None = None) -> tuple[int, int]:
    """Remove tokfst's entries and temporary files (nothing else); (files removed, bytes freed)."""
    root = root or cache_dir()
    files, freed = 0, 0
    for p in [e.path for e in entries(root, check=False)] + temporaries(root):
        try:
            size = p.stat().st_size
            p.unlink()
        except FileNotFoundError:
            continue
        except OSError as e:
            raise TokfstError(f"cannot remove {p}: {e.strerror or e}", "check the cache directory's permissions") \
                from None
        files, freed = files + 1, freed + size
    with contextlib.suppress(OSError):
        (root / "bench").rmdir()  # only if empty
    return files, freed


def writable(root: Path | None = None) -> bool:
    """Could tokfst store entries here? (probes an existing directory, else its nearest ancestor)."""
    root = root or cache_dir()
    if root.is_dir():
        try:
            fd, tmp = tempfile.mkstemp(prefix=".tokfst-probe.", dir=root)
        except OSError:
            return False
        os.close(fd)
        os.unlink(tmp)
        return True
    probe = root
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)


def summary(root: Path | None = None, check: bool = False) -> dict:
    """Location, entry count and size, writability (and, with ``check``, entries that do not verify)."""
    root = root or cache_dir()
    found = entries(root, check=check)
    out = {"location": str(root), "exists": root.is_dir(), "entries": len(found),
           "bytes": sum(e.size for e in found), "writable": writable(root),
           "temporary_files": len(temporaries(root))}
    if check:
        out["unverified"] = sum(1 for e in found if not e.verified)
    return out
