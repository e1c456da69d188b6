"""Shared command-line plumbing: stderr console, progress, limits, input resolution."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator

import typer
from rich.console import Console

from ..errors import InputError

STATE = {"debug": False}
err = Console(stderr=True, highlight=False, no_color=bool(os.environ.get("NO_COLOR")) or None)

MAX_STATES_HELP = "Stop with an error instead of building an automaton with more states than this."
MaxStates = typer.Option(1_000_000, "--max-states", min=1, metavar="N", help=MAX_STATES_HELP)


def say(message: str) -> None:
    """One diagnostic line on stderr, never wrapped or styled."""
    err.print(message, markup=False, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def progress(message: str) -> Iterator[None]:
    """A spinner on stderr, only when stderr is a terminal."""
    if err.is_terminal:
        with err.status(message):
            yield
    else:
        yield


def read_pattern(regex: str | None, regex_file: str | None) -> str:
    """The pattern from -e, or from -f FILE ('-' = stdin; one trailing newline dropped)."""
    if (regex is None) == (regex_file is None):
        raise InputError("give exactly one of -e REGEX or -f REGEX_FILE", "see 'tokfst promote --help'")
    if regex is not None:
        return regex
    try:
        text = sys.stdin.read() if regex_file == "-" else open(regex_file, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read regex file {regex_file}: {getattr(e, 'strerror', None) or e}",
                         "give a readable UTF-8 file") from None
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    if not text:
        raise InputError(f"regex file {regex_file} is empty", "put one pattern in the file")
    return text


def refuse_binary_tty(out: str | None) -> None:
    if out in (None, "-") and sys.stdout.isatty():
        raise InputError("refusing to write a binary FST to a terminal", "give OUT or redirect stdout")


def print_counts(counts: dict, as_json: bool) -> None:
    """--info output: one JSON object, or aligned "key value" lines."""
    if as_json:
        print(json.dumps(counts))
        return
    width = max(map(len, counts), default=0) + 1
    for k, v in counts.items():
        print(f"{k:{width}s} {v}")
