"""The program: the ``tokfst`` console script (``[project.scripts]``) and ``python -m tokfst_cli``.

Signal handling comes first, before the command line and its heavy imports (typer, rich, numpy,
pynini, tokenizers: about a quarter of a second of start-up) are loaded. Until the command runs,
nothing has been written, so SIGINT, SIGTERM or SIGHUP end the process at once with one line on
stderr and exit 128 + the signal number (130, 143, 129), never a traceback; from then on
:func:`tokfst_cli.cli.app.main` and its supervisor (:mod:`tokfst_cli.support.guard`) take over. A signal that
was ignored when tokfst started (``nohup``, ``&`` in a script) stays ignored. Only the
interpreter's own start-up (``site`` and ``.pth`` files, before any tokfst code) is Python's.
"""

import os
import signal

from tokfst_cli.support.meta import signal_line

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # tokfst_cli.support.guard.FORWARDED


def _stop(signum: int, frame) -> None:
    """Before the command runs: one line, exit 128 + signum, no clean-up needed (nothing written)."""
    try:
        os.write(2, f"{signal_line(signum)}\n".encode())
    except OSError:
        pass
    os._exit(128 + signum)


def stop_on_signals() -> None:
    """Install :func:`_stop` for :data:`SIGNALS`, except those inherited as ignored."""
    for s in SIGNALS:
        if signal.getsignal(s) != signal.SIG_IGN:
            signal.signal(s, _stop)


def main() -> None:
    stop_on_signals()
    from tokfst_cli.cli.app import main as cli_main  # deferred: the heavy imports, after the signal handlers

    cli_main()


if __name__ == "__main__":
    main()
