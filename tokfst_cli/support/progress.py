"""Stage announcements: the pipeline says which stage runs and how big it has grown.

Library code calls :func:`stage` around each construction (``with stage("A o T"):``) and may
call :func:`report` with the size reached so far. Listeners registered by the caller (the
command line's progress line, a supervisor that names the stage a limit stopped) receive
``(name, size, elapsed_seconds)``; with no listener this costs a function call.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

Listener = Callable[[str, "int | None", float], None]
_listeners: list[Listener] = []
_current: list[tuple[str, float]] = []


def listen(listener: Listener) -> Callable[[], None]:
    """Register ``listener``; returns the function that removes it."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener) if listener in _listeners else None


def current() -> str | None:
    """The innermost stage running now, if any."""
    return _current[-1][0] if _current else None


def report(size: int | None = None) -> None:
    """The current stage has reached ``size`` (states, arcs, lines: the stage's own unit)."""
    if _current and _listeners:
        name, t0 = _current[-1]
        for f in list(_listeners):
            f(name, size, time.monotonic() - t0)


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Announce the stage ``name`` for the duration of the block."""
    _current.append((name, time.monotonic()))
    try:
        report()
        yield
    finally:
        _current.pop()
