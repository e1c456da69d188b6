"""The command line's one output object: data to stdout or OUT, diagnostics and progress to stderr.

Every command writes through :data:`OUT`: ``data`` (bytes, to a file written atomically or to
stdout), ``text`` and ``json`` (lines on stdout), ``say`` (one diagnostic line on stderr, never
wrapped or styled) and ``progress`` (a spinner, only when stderr is a terminal; rich honours
NO_COLOR). Errors are worded in :mod:`.errors`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import pynini
from rich.console import Console

from ..artifacts import write_bytes, write_fst
from ..errors import InputError


class Output:
    def __init__(self) -> None:
        self.err = Console(stderr=True, highlight=False, no_color=bool(os.environ.get("NO_COLOR")) or None)

    def say(self, message: str) -> None:
        """One diagnostic line on stderr."""
        self.err.print(message, markup=False, highlight=False, soft_wrap=True)

    @contextlib.contextmanager
    def progress(self, message: str) -> Iterator[None]:
        """A spinner on stderr, only when stderr is a terminal."""
        if self.err.is_terminal:
            with self.err.status(message):
                yield
        else:
            yield

    def refuse_binary_tty(self, out: str | None, what: str = "a binary FST") -> None:
        if out in (None, "-") and sys.stdout.isatty():
            raise InputError(f"refusing to write {what} to a terminal", "give OUT or redirect stdout")

    def data(self, out: str | None, data: bytes) -> None:
        """Bytes to OUT (atomically) or stdout (absent or '-')."""
        write_bytes(out, data)

    def fst(self, out: str | None, fst: pynini.Fst) -> None:
        """An OpenFst binary to OUT (atomically) or stdout."""
        write_fst(out, fst)

    def text(self, line: str) -> None:
        """One line of data on stdout."""
        sys.stdout.write(line + "\n")

    def record(self, obj: Any) -> None:
        """One JSON object as a line on stdout (--json output)."""
        self.text(json.dumps(obj))

    def document(self, out: str | None, obj: Any) -> None:
        """A JSON document (UTF-8, not ASCII-escaped) to OUT or stdout."""
        self.data(out, (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8"))

    def counts(self, counts: dict, as_json: bool) -> None:
        """--info output: one JSON object, or aligned "key value" lines."""
        if as_json:
            self.record(counts)
            return
        width = max(map(len, counts), default=0) + 1
        for k, v in counts.items():
            self.text(f"{k:{width}s} {v}")

    def flush(self) -> None:
        sys.stdout.flush()


OUT = Output()
