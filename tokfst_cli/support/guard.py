"""The supervisor: run a command in a child process under a time and a memory limit.

Python cannot interrupt OpenFst's native code, so the limits are kept from outside. :func:`run`
forks; the child caps its address space (``RLIMIT_AS``: what it maps now plus ``max_memory``
minus what is or may become resident without a new mapping, so its resident memory stays under
``max_memory``), announces every stage of :mod:`tokfst_cli.support.progress` to the parent in shared
memory, and runs the command. The parent waits: past the time limit it kills the child;
SIGINT, SIGTERM and SIGHUP are forwarded, unless tokfst was started with them ignored (``nohup``;
the child stops at once when it runs Python code, removing its temporary files; after a grace
period in native code it is killed); a child killed by the parent, or dead of its memory limit
(``std::bad_alloc`` aborts), has its temporary files removed by the parent. The
:class:`Outcome` says which limit ended the command, in which stage, and the peak memory.

The time limit and the output (:class:`_Commit`): once the command's output is in place the run
is finished. The child renames its output into place holding a lock that the parent takes
before it kills at the time limit, so the limit fires either before the rename (the child is
killed, an existing file is untouched, exit 3) or after it: then the child is left to end by
itself (its last lines), and one still running ``grace`` seconds later is killed with exit 0.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import mmap
import os
import re
import resource
import signal
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tokfst_cli.support import files, progress
from tokfst_cli.support.meta import signal_line

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GRACE = 1.0  # seconds a signalled child may take to stop by itself before it is killed
MEMORY_SIGNALS = (signal.SIGABRT, signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS)
_POLL = 0.02  # seconds between two looks at the child
MEMORY_EXIT = 127  # the child ran out of memory before it could say so (also glibc's loader's code then)
RLIM_MAX = (1 << 63) - 1  # the largest resource limit setrlimit takes (a C long)


class Interrupted(BaseException):
    """Raised in the child by SIGINT, SIGTERM or SIGHUP (exit 128 + signal number)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@dataclass
class Outcome:
    """How the child ended.

    ``code`` is the exit code to use. ``reason`` None: the child exited by itself (with its own
    messages); ``"time"``: killed at the time limit; ``"memory"``: died of its memory limit
    without a word (native code aborts); ``"signal"``: ``signum`` was forwarded and the child
    stopped or was killed; ``"crash"``: another signal killed it. ``stage`` and ``size``: the
    last stage announced and the last size it reported; ``peak_rss``: the child's peak resident
    memory in bytes; ``removed``: the temporary files the parent removed. ``written``: the
    command's output was in place when the child ended; ``"late"``: the time limit came after
    that and the child, still running ``grace`` seconds later, was killed (exit 0).
    """

    code: int
    reason: str | None = None
    stage: str | None = None
    size: int | None = None
    elapsed: float = 0.0
    peak_rss: int = 0
    signum: int | None = None
    removed: tuple[str, ...] = ()
    written: bool = False


def memory_total() -> int | None:
    """Physical memory in bytes: MemTotal of /proc/meminfo, or the cgroup's memory.max if lower."""
    total = None
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) * 1024
                    break
    with contextlib.suppress(OSError, ValueError):
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as f:
            cap = f.read().strip()
        if cap.isdigit():
            total = min(total, int(cap)) if total else int(cap)
    return total


DEFAULT_SHARE = 0.75  # of physical memory: the default --max-memory


def default_max_memory() -> int | None:
    total = memory_total()
    return int(total * DEFAULT_SHARE) if total else None


_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(i?b?)\s*", re.I)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int | None:
    """``4G``, ``500M``, ``1.5g``, ``123456`` (bytes), ``50%`` (of physical memory); 0 = no limit (None).

    ValueError for anything else.
    """
    text = text.strip()
    if text.endswith("%"):
        share = float(text[:-1])
        total = memory_total()
        if not 0 <= share <= 100 or total is None:
            raise ValueError(text)
        return int(total * share / 100) or None
    m = _SIZE.fullmatch(text)
    if not m:
        raise ValueError(text)
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    return value or None


def format_size(n: int) -> str:
    """Bytes as the largest unit that keeps one decimal at most: 300M, 1.5G."""
    for unit in ("T", "G", "M", "K"):
        scale = _UNITS[unit.lower()]
        if n >= scale:
            v = n / scale
            return f"{v:.0f}{unit}" if v == int(v) or v >= 100 else f"{v:.1f}{unit}"
    return f"{n}B"


def temp_file_pattern(pid: int) -> re.Pattern:
    """The temporary files process ``pid`` writes beside its outputs: ``.NAME.PID.XXXXXXXX.tmp``
    (``tokfst_cli.support.files.temp_prefix`` and mkstemp's suffix)."""
    return re.compile(rf"\..+\.{pid}\.[A-Za-z0-9_]+\.tmp")


def remove_temp_files(pid: int, directories: Iterable[str]) -> list[str]:
    """Remove the temporary files of (dead) process ``pid`` in ``directories``."""
    pattern, removed = temp_file_pattern(pid), []
    for d in dict.fromkeys(directories):
        with contextlib.suppress(OSError):
            for entry in os.scandir(d):
                if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
                        removed.append(entry.path)
    return removed


class _Board:
    """The child's current stage and size, in memory shared with the parent (no system call per report).

    Layout: a sequence number (odd while the child writes), the size (-1: none), the name's
    length and the name (UTF-8, cut at the board's size).
    """

    SIZE = 4096
    _HEAD = struct.Struct("<QqI")

    def __init__(self) -> None:
        self.mem = mmap.mmap(-1, self.SIZE)  # anonymous and shared: the forked child writes, the parent reads
        self.seq = 0

    def write(self, name: str, size: int | None, elapsed: float = 0.0) -> None:
        data = name.encode("utf-8", "replace")[: self.SIZE - self._HEAD.size]
        self.seq += 1
        self._HEAD.pack_into(self.mem, 0, self.seq, -1, 0)
        self.mem[self._HEAD.size:self._HEAD.size + len(data)] = data
        self.seq += 1
        self._HEAD.pack_into(self.mem, 0, self.seq, -1 if size is None else size, len(data))

    def read(self) -> tuple[str | None, int | None]:
        for _ in range(100):
            seq, size, n = self._HEAD.unpack_from(self.mem, 0)
            name = bytes(self.mem[self._HEAD.size:self._HEAD.size + n]).decode("utf-8", "replace")
            if seq % 2 == 0 and self._HEAD.unpack_from(self.mem, 0)[0] == seq:
                return (name, None if size < 0 else size) if seq else (None, None)  # seq 0: nothing announced
            time.sleep(0.001)
        return None, None  # the child died while writing


class _Commit:
    """The moment the command's output is put in place, kept apart from the time limit.

    A POSIX record lock on an anonymous file (held per process, so parent and child exclude each
    other; released when its holder dies) and a flag in shared memory. The child renames holding
    the lock and sets the flag (:meth:`rename`); the parent, at the time limit, takes the lock
    without waiting (:meth:`may_kill`): if the child holds it, the rename is under way and the
    parent looks again at its next poll; if the flag is set, the output is in place; else the
    parent keeps the lock, so the child can no longer rename, and kills it."""

    def __init__(self) -> None:
        try:
            self.file = os.memfd_create("tokfst-commit", os.MFD_CLOEXEC)
        except (AttributeError, OSError):  # not Linux: an unlinked file
            with tempfile.TemporaryFile() as f:
                self.file = os.dup(f.fileno())
        self.flag = mmap.mmap(-1, mmap.PAGESIZE)  # anonymous and shared: byte 0 is 1 once the output is in place

    def rename(self, rename: Callable[[], None]) -> None:
        """In the child: ``rename()`` under the lock (blocks while the parent kills), then set the flag."""
        fcntl.lockf(self.file, fcntl.LOCK_EX)
        try:
            rename()
            self.flag[0] = 1
        finally:
            fcntl.lockf(self.file, fcntl.LOCK_UN)

    @property
    def done(self) -> bool:
        return self.flag[0] == 1

    def may_kill(self) -> bool:
        """In the parent at the time limit: True (the lock kept for good) if the output is not in
        place and cannot be put there any more; False if it is, or is being put there now."""
        try:
            fcntl.lockf(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # the child is renaming: look again at the next poll
            return False
        if self.done:
            fcntl.lockf(self.file, fcntl.LOCK_UN)
            return False
        return True

    def close(self) -> None:
        self.flag.close()
        os.close(self.file)


_BOARD: _Board | None = None  # in a guarded child: its board


def last_stage() -> tuple[str | None, int | None]:
    """In a guarded child, the last stage announced and its size (None, None elsewhere)."""
    return _BOARD.read() if _BOARD is not None else (None, None)


def handled_signals() -> list[int]:
    """The signals of :data:`FORWARDED` this process does not ignore: one ignored when tokfst
    started (``nohup``, ``&`` in a script) stays ignored, in the supervisor and in its child."""
    return [s for s in FORWARDED if signal.getsignal(s) != signal.SIG_IGN]


# ---- the child ---------------------------------------------------------------------------------
_UNRAISABLE = ("__del__",)  # functions whose exceptions Python prints as "Exception ignored" and drops


def _unraisable(frame) -> bool:
    """Is ``frame`` where an exception would be printed and dropped: a weak-reference callback of
    the import system (a module lock's clean-up) or a finalizer?"""
    if frame is None:
        return False
    if frame.f_code.co_filename.startswith("<frozen importlib"):  # innermost only: imports themselves raise
        return True
    while frame is not None:
        if frame.f_code.co_name in _UNRAISABLE:
            return True
        frame = frame.f_back
    return False


def _on_signal(signum: int, frame) -> None:
    for s in FORWARDED:  # the first signal wins; a forwarded copy of it must not interrupt the cleanup
        signal.signal(s, signal.SIG_IGN)
    if _unraisable(frame):  # raised here it would be lost with a traceback: raise it a moment later
        signal.signal(signal.SIGALRM, lambda _s, f: _on_signal(signum, f))
        signal.setitimer(signal.ITIMER_REAL, 0.002)
        return
    raise Interrupted(signum)


def raise_on_signals() -> None:
    """Raise :class:`Interrupted` on SIGINT, SIGTERM and SIGHUP (unless ignored): the command run
    in this process (unguarded) stops by an exception, and removes its temporary files."""
    for s in handled_signals():
        signal.signal(s, _on_signal)


def _touch_thread_locals() -> None:
    """Allocate libstdc++'s thread-local exception globals now: glibc allocates a loaded library's
    thread-local block on first use, and past the memory limit it aborts with a line of its own."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libstdc++.so.6").__cxa_get_globals()


def _quiet_terminate() -> None:
    """Let std::bad_alloc abort without libstdc++'s two-line message (the parent words it)."""
    with contextlib.suppress(OSError, AttributeError):
        libstdcxx, libc = ctypes.CDLL("libstdc++.so.6"), ctypes.CDLL(None)
        set_terminate = libstdcxx._ZSt13set_terminatePFvvE
        set_terminate.argtypes, set_terminate.restype = [ctypes.c_void_p], ctypes.c_void_p
        set_terminate(ctypes.cast(libc.abort, ctypes.c_void_p))


def _die_with_parent(parent: int) -> None:
    """SIGTERM when the parent dies (Linux), so a killed supervisor leaves no worker behind."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def _address_space_cap(max_memory: int) -> int:
    """RLIMIT_AS that keeps the resident size under ``max_memory``.

    The forked child already maps the interpreter and its libraries (hundreds of MB of address
    space, far less of it resident), so capping the address space at ``max_memory`` itself would
    starve it. Resident memory can grow by new mappings (which the cap counts) and by pages of
    existing mappings becoming resident: writable or reserved ones (heaps, buffers) are counted
    here as if resident already; read-only file pages (library code) are left out, being clean
    page cache. So the child may map ``max_memory`` minus its resident size minus those pages."""
    vm_size = resident = writable_gap = 0
    perms, size = "", 0
    try:
        with open("/proc/self/smaps", encoding="ascii", errors="replace") as f:
            for line in f:
                field, _, rest = line.partition(" ")
                if "-" in field and not field.endswith(":"):
                    perms = rest.split(" ", 1)[0]
                elif field == "Size:":
                    size = int(rest.split()[0]) * 1024
                    vm_size += size
                elif field == "Rss:":
                    rss = int(rest.split()[0]) * 1024
                    resident += rss
                    if "w" in perms or perms.startswith("---"):
                        writable_gap += size - rss
    except (OSError, ValueError):
        return max_memory
    if not vm_size:
        return max_memory
    return vm_size + max(0, max_memory - resident - writable_gap)


def _child(fn: Callable[[], int], board: "_Board", commit: _Commit, max_memory: int | None, parent: int) -> None:
    code = 1
    try:
        try:
            raise_on_signals()  # the dispositions the parent had before the fork
            _die_with_parent(parent)
            if max_memory:
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                with contextlib.suppress(OSError):  # C++'s unwinder (std::bad_alloc) loads it; no room later
                    ctypes.CDLL("libgcc_s.so.1")
                _touch_thread_locals()
                _, hard = resource.getrlimit(resource.RLIMIT_AS)
                cap = _address_space_cap(max_memory)
                cap = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
                if cap < RLIM_MAX:  # past it (a limit of exabytes) nothing can be capped: none is needed
                    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
                _quiet_terminate()
            global _BOARD
            _BOARD = board
            progress.listen(board.write)
            files.on_commit(commit.rename)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
            code = fn()
        finally:  # no handler runs from here on: a late signal cannot skip the exit below
            signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    except Interrupted as e:  # a signal outside fn's own handling (its start, its return): one line too
        code = e.exit_code
        with contextlib.suppress(OSError):
            os.write(2, f"{signal_line(e.signum)}\n".encode())
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except MemoryError:  # under the cap before fn could word it (or while it did): the parent words it
        code = MEMORY_EXIT if max_memory else 1
    except BaseException:  # noqa: BLE001 - fn words its own errors; this is the last resort
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


# ---- the parent --------------------------------------------------------------------------------
def _descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (read from Linux's /proc; none elsewhere), parents first."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", "rb") as f:
                        fields = f.read().rsplit(b")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
                    children.setdefault(int(fields[1]), []).append(int(entry))
                except (OSError, IndexError, ValueError):  # gone meanwhile
                    continue
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out



def run(fn: Callable[[], int], timeout: float | None = None, max_memory: int | None = None,
        temp_dirs: Iterable[str] = (), grace: float = GRACE) -> Outcome:
    """Run ``fn`` (returning an exit code) in a forked child under the limits; see the module docstring.

    ``timeout`` in seconds and ``max_memory`` in bytes (None: no limit); ``temp_dirs``: where
    the child may leave temporary files if it is killed. Call it from the main thread.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    board, commit = _Board(), _Commit()
    parent = os.getpid()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        raise
    if pid == 0:
        _child(fn, board, commit, max_memory, parent)  # never returns
    start = time.monotonic()
    state = {"signum": None, "kill_at": None, "killed": None}

    def forward(signum: int, frame) -> None:
        if state["signum"] is None:
            state["signum"], state["kill_at"] = signum, time.monotonic() + grace
            with contextlib.suppress(OSError):
                os.kill(pid, signum)
        else:  # a second signal: stop now
            state["kill_at"] = time.monotonic()

    saved = {s: signal.signal(s, forward) for s in handled_signals()}
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    try:
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            now = time.monotonic()
            if state["killed"] is None:
                if timeout is not None and now - start >= timeout and not commit.done:
                    state["killed"] = "time" if commit.may_kill() else None
                elif timeout is not None and now - start >= timeout + grace:  # the output in place long ago
                    state["killed"] = "late"
                elif state["kill_at"] is not None and now >= state["kill_at"]:
                    state["killed"] = "signal"
                if state["killed"]:
                    # the child first, then what it started (Graphviz's dot), listed while the child lives:
                    # no orphans, and no child that sees its own child die and exits 0 before its kill lands
                    for p in (pid, *_descendants(pid)):
                        with contextlib.suppress(OSError):
                            os.kill(p, signal.SIGKILL)
            time.sleep(_POLL)
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
    stage, size = board.read()
    board.mem.close()
    written = commit.done
    commit.close()
    elapsed = time.monotonic() - start
    out = Outcome(code=1, stage=stage, size=size, elapsed=elapsed,
                  peak_rss=usage.ru_maxrss * 1024, signum=state["signum"], written=written)
    if os.WIFEXITED(status):  # the child said what happened itself
        out.code = os.WEXITSTATUS(status)
        if out.code == MEMORY_EXIT and max_memory:  # out of memory before fn could say so, or glibc's loader
            out.removed = tuple(remove_temp_files(pid, temp_dirs))
            out.code, out.reason = 3, "memory"
        return out
    sig = os.WTERMSIG(status)
    out.removed = tuple(remove_temp_files(pid, temp_dirs))
    if state["killed"] == "time":
        out.code, out.reason = 3, "time"
    elif state["killed"] == "late":
        out.code, out.reason = 0, "late"
    elif state["signum"] is not None:
        out.code, out.reason = 128 + state["signum"], "signal"
    elif sig in FORWARDED:
        out.code, out.reason, out.signum = 128 + sig, "signal", sig
    elif max_memory and sig in MEMORY_SIGNALS:
        out.code, out.reason = 3, "memory"
    else:
        out.code, out.reason, out.signum = 1, "crash", sig
    return out
