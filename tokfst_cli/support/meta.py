"""The package's version and the one line a run ended by a signal leaves on stderr."""

import signal as _signal

__version__ = "0.1.0"


def signal_line(signum: int) -> str:
    """The one line a run ended by a signal leaves on stderr (exit 128 + signum): SIGINT is
    "interrupted", SIGTERM and SIGHUP "terminated". Said by whoever sees the signal first: the
    entry point before the command runs (``__main__``), the command line, or the guarded child's
    last resort (``guard``)."""
    return "tokfst: interrupted" if signum == _signal.SIGINT else "tokfst: terminated"
