"""The command line's one output object: data to stdout or OUT, diagnostics and progress to stderr.

Every command writes through :data:`OUT`: ``data`` (bytes, to a file written atomically, a
FIFO or device written in place, or stdout: :func:`tokfst_cli.support.files.destination`), ``text``
and ``record`` (lines on stdout), ``say`` (one diagnostic line on stderr, never wrapped or
styled) and ``progress`` (an activity). Errors are worded in :mod:`.errors`.

The progress line: while an activity or a pipeline stage (:mod:`tokfst_cli.support.progress`) has been
running for more than ~1 s (``TOKFST_PROGRESS_DELAY`` seconds), a rich status line on stderr
shows the activity, the stage, the size reached so far and the time elapsed; it is erased when
the work ends. Nothing is shown when stderr is not a terminal, or when quiet (the global
``--quiet`` calls :meth:`Output.set_quiet`; ``TOKFST_QUIET=1`` does the same). rich honours
NO_COLOR.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pynini
from rich.console import Console

from tokfst_cli.automata.fst_io import fst_bytes
from tokfst_cli.errors import InputError
from tokfst_cli.support import progress as stages
from tokfst_cli.support.files import destination, write_bytes, write_error

TICK = 0.1  # seconds between progress line updates


def _truthy(value: str | None) -> bool:
    return bool(value) and value.strip().lower() not in ("0", "false", "no", "off")


class ProgressLine:
    """The one status line: shown once the outermost activity or stage has run ``delay`` seconds."""

    def __init__(self, out: "Output") -> None:
        self.out = out
        self.lock = threading.Lock()
        self.activities: list[tuple[str, float]] = []
        self.stages: dict[str, tuple[float, int | None]] = {}  # name -> (start, size so far)
        self.first: float | None = None  # start of the outermost activity or stage
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()
        self.shown = threading.Event()  # the line has been drawn once

    def enabled(self) -> bool:
        return not self.out.is_quiet() and self.out.err.is_terminal

    def on_report(self, name: str, size: int | None, elapsed: float) -> None:
        """A :func:`tokfst_cli.support.progress.listen` listener."""
        if not self.enabled():
            return
        start = time.monotonic() - elapsed
        with self.lock:
            old = self.stages.get(name)
            if size is None and old is not None and abs(old[0] - start) < 1e-3:
                size = old[1]
            self.stages[name] = (start, size)
            if self.first is None:
                self.first = start
        self._ensure_thread()

    @contextlib.contextmanager
    def activity(self, label: str) -> Iterator[None]:
        if not self.enabled():
            yield
            return
        now = time.monotonic()
        with self.lock:
            self.activities.append((label, now))
            if self.first is None:
                self.first = now
        self._ensure_thread()
        if self.out.delay() <= 0:  # no delay: the line is on screen before the work starts
            self.shown.wait(0.5)
        try:
            yield
        finally:
            with self.lock:
                self.activities.pop()
                done = not self.activities
            if done:
                self.finish()

    def _ensure_thread(self) -> None:
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.stop.clear()
                self.shown.clear()
                self.thread = threading.Thread(target=self._run, name="tokfst-progress", daemon=True)
                self.thread.start()

    def finish(self) -> None:
        """Stop the line (erasing it) and forget the finished work."""
        self.stop.set()
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self.lock:
            self.thread, self.first = None, None
            self.stages.clear()

    def text(self) -> str | None:
        """"activity — stage — size — elapsed" for what runs now; None when nothing does."""
        stage = stages.current()
        with self.lock:
            label = self.activities[-1][0] if self.activities else None
            first = self.first
            start, size = self.stages.get(stage, (None, None)) if stage else (None, None)
        if (label is None and stage is None) or first is None:
            return None
        parts = [p for p in (label, stage) if p]
        if size is not None:
            parts.append(f"{size:,}")
        parts.append(f"{time.monotonic() - first:.1f} s")
        return " — ".join(parts)

    def _run(self) -> None:
        status = None
        try:
            while True:
                text = self.text()
                if text is None:
                    with self.lock:
                        if not self.activities:
                            break
                elif status is not None:
                    status.update(text)
                else:
                    with self.lock:
                        first = self.first
                    if first is not None and time.monotonic() - first >= self.out.delay():
                        status = self.out.err.status(text, spinner="dots")
                        status.start()
                        self.shown.set()
                if self.stop.wait(TICK):
                    break
        finally:
            if status is not None:
                status.stop()


class Output:
    def __init__(self) -> None:
        self.err = Console(stderr=True, highlight=False, no_color=bool(os.environ.get("NO_COLOR")) or None)
        self.quiet = False
        self.line = ProgressLine(self)
        self.unlisten = stages.listen(self.line.on_report)

    def set_quiet(self, quiet: bool = True) -> None:
        """No progress line (the global --quiet)."""
        self.quiet = quiet

    def is_quiet(self) -> bool:
        return self.quiet or _truthy(os.environ.get("TOKFST_QUIET"))

    @staticmethod
    def delay() -> float:
        try:
            return float(os.environ.get("TOKFST_PROGRESS_DELAY", "1"))
        except ValueError:
            return 1.0

    def say(self, message: str) -> None:
        """One diagnostic line on stderr."""
        self.err.print(message, markup=False, highlight=False, soft_wrap=True)

    @contextlib.contextmanager
    def progress(self, message: str) -> Iterator[None]:
        """An activity: the progress line shows it (and the stages inside) after ~1 s on a terminal."""
        with self.line.activity(message):
            yield

    def refuse_binary_tty(self, out: str | None, what: str = "a binary FST") -> None:
        """Refuse binary data for a terminal (stdout, /dev/stdout, /dev/tty...); refuse a directory OUT early."""
        if _is_terminal(out):
            raise InputError(f"refusing to write {what} to a terminal", "give OUT or redirect stdout")

    def data(self, out: str | None, data: bytes) -> None:
        """Bytes to OUT (atomically, or in place for FIFOs and devices) or stdout (absent or '-').
        The command's output: once in place the run is finished (the supervisor's time limit no
        longer ends it: :mod:`tokfst_cli.support.guard`)."""
        write_bytes(out, data, final=True)

    def fst(self, out: str | None, fst: pynini.Fst) -> int:
        """A sealed OpenFst binary to OUT or stdout (the command's output, as :meth:`data`); its size."""
        data = fst_bytes(fst)
        self.data(out, data)
        return len(data)

    def text(self, line: str) -> None:
        """One line of data on stdout (a failed write, e.g. a full disk, is a one-line error)."""
        try:
            sys.stdout.write(line + "\n")
        except BrokenPipeError:
            raise
        except OSError as e:
            raise write_error(e, "standard output") from None

    def record(self, obj: Any) -> None:
        """One JSON object as a line on stdout (--json output)."""
        self.text(json.dumps(obj))

    def document(self, out: str | None, obj: Any) -> int:
        """A JSON document (UTF-8, not ASCII-escaped) to OUT or stdout; its size in bytes."""
        data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
        self.data(out, data)
        return len(data)

    def counts(self, counts: dict, as_json: bool) -> None:
        """--info output: one JSON object, or aligned "key value" lines."""
        if as_json:
            self.record(counts)
            return
        width = max(map(len, counts), default=0) + 1
        for k, v in counts.items():
            self.text(f"{k:{width}s} {v}")

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise write_error(e, "standard output") from None


def _is_terminal(out: str | None) -> bool:
    dest = destination(out)  # InputError for a directory: before any work is done
    if dest.kind == "stdout":
        return sys.stdout.isatty()
    if dest.kind == "fd":
        return os.isatty(dest.fd)
    if dest.kind == "device":
        try:
            if not stat.S_ISCHR(os.stat(dest.path).st_mode):
                return False  # a FIFO is never opened twice (its reader would see EOF)
            fd = os.open(dest.path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            return False
        try:
            return os.isatty(fd)
        finally:
            os.close(fd)
    return False


OUT = Output()
