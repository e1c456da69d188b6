"""The two ways tests run the command line.

* :func:`run`: in-process (``tokfst_cli.cli.app.main`` with argv, stdin and stdout/stderr captured):
  fast, for behaviour and messages.
* :func:`tokfst`: the installed console script in a subprocess: for pipes, TTYs, signals,
  environment variables, concurrency and OpenFst's own tools (:func:`tool`); :func:`run_many`
  runs independent ones concurrently, :func:`tokfst_on_a_tty` gives stderr a pseudo-terminal.
"""

from __future__ import annotations

import contextlib
import io
import os
import pty
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

TOKFST = Path(sys.executable).with_name("tokfst")
COLOR_VARS = ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
ANSI = re.compile(rb"\x1b")  # any escape sequence
SGR = re.compile(rb"\x1b\[[0-9;]*m")  # a colour or style code


@dataclass
class Run:
    args: tuple
    rc: int
    out: bytes
    err: bytes

    @property
    def returncode(self) -> int:
        return self.rc

    @property
    def stdout(self) -> str:
        return self.out.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.err.decode("utf-8", "replace")

    @property
    def err_lines(self) -> list[str]:
        return self.stderr.splitlines()


def make_env(cache: Path | None = None, **extra: str) -> dict[str, str]:
    """The test environment without colour settings; ``cache`` as TOKFST_CACHE."""
    env = {k: v for k, v in os.environ.items() if k not in COLOR_VARS}
    if cache is not None:
        env["TOKFST_CACHE"] = str(cache)
    env.update(extra)
    return env


def tokfst(*args, env: dict | None = None, stdin: bytes | str | None = None, cwd: Path | None = None,
           timeout: float = 300) -> Run:
    """The installed ``tokfst`` in a subprocess (stdin empty unless given)."""
    assert TOKFST.is_file(), f"the console script is not installed at {TOKFST}"
    data = stdin.encode("utf-8") if isinstance(stdin, str) else (stdin if stdin is not None else b"")
    p = subprocess.run([str(TOKFST), *map(str, args)], input=data, capture_output=True, env=env, cwd=cwd,
                       timeout=timeout)
    return Run(tuple(args), p.returncode, p.stdout, p.stderr)


def run_many(jobs: dict, workers: int = 3) -> dict:
    """{key: (args, kwargs)} -> {key: Run}: independent :func:`tokfst` subprocesses, run concurrently."""
    with ThreadPoolExecutor(workers) as pool:
        futures = {k: pool.submit(tokfst, *a, **kw) for k, (a, kw) in jobs.items()}
        return {k: f.result() for k, f in futures.items()}


def tokfst_on_a_tty(*args, env: dict | None = None, timeout: float = 120) -> Run:
    """The installed ``tokfst`` with stderr on a pseudo-terminal (stdin and stdout: /dev/null)."""
    master, slave = pty.openpty()
    try:
        p = subprocess.run([str(TOKFST), *map(str, args)], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=slave, env=env, timeout=timeout)
    finally:
        os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return Run(tuple(args), p.returncode, b"", b"".join(chunks))


class _Bytes(io.TextIOWrapper):
    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", write_through=True)

    def value(self) -> bytes:
        self.flush()
        return self.buffer.getvalue()


def run(*args, stdin: bytes | str | None = None) -> Run:
    """``tokfst ARGS`` in this process: exit code, stdout and stderr bytes."""
    from rich.console import Console

    from tokfst_cli.cli import output
    from tokfst_cli.cli.app import main

    data = stdin.encode("utf-8") if isinstance(stdin, str) else (stdin or b"")
    out, err = _Bytes(), _Bytes()
    saved = sys.argv, sys.stdin, output.OUT.err
    sys.argv = ["tokfst", *map(str, args)]
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    output.OUT.err = Console(file=err, highlight=False, no_color=True, width=10_000)
    rc = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv, sys.stdin, output.OUT.err = saved
    return Run(tuple(args), rc, out.value(), err.value())


@contextlib.contextmanager
def inside(cwd: Path, env: dict[str, str] | None = None):
    """This process in ``cwd`` with ``env`` as its environment, both restored after."""
    here, saved = os.getcwd(), dict(os.environ)
    os.chdir(cwd)
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    try:
        yield
    finally:
        os.chdir(here)
        if env is not None:
            os.environ.clear()
            os.environ.update(saved)


def strip_comment(line: str) -> str:
    """The command without a trailing shell comment (a '#' outside quotes, after a space)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"':
                continue
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def plain_argv(command: str) -> list[str] | None:
    """A ``tokfst ...`` command's words, or None where a shell must read it: an operator (pipe,
    redirection, list), or an expansion (``$``, a backquote, a glob, ``~``) outside quotes."""
    lex = shlex.shlex(command, posix=False, punctuation_chars=True)
    lex.whitespace_split, lex.commenters = True, ""
    for word in lex:
        if word[0] in "'\"":
            continue
        if set(word) <= set("();<>|&") or any(c in word for c in "$`*?[~"):
            return None
    argv = shlex.split(command)
    return argv if argv and argv[0] == "tokfst" else None


def run_line(line: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> Run:
    """One documented command line from ``cwd``: a plain ``tokfst ...`` in this process (:func:`run`),
    anything a shell must read through ``bash -o pipefail``."""
    command = strip_comment(line)
    argv = plain_argv(command)
    if argv is not None:
        with inside(cwd, env):
            return run(*argv[1:])
    p = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env, capture_output=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return Run((command,), p.returncode, p.stdout, p.stderr)


def run_python(code: str, where: str, cwd: Path) -> None:
    """A documented Python block, run in this process from ``cwd`` as a script (``__main__``); its
    output is discarded, an exception fails the caller."""
    with inside(cwd), contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, where, "exec"), {"__name__": "__main__"})


def tool(*args) -> subprocess.CompletedProcess:
    """An OpenFst or graphviz command line tool."""
    return subprocess.run([str(a) for a in args], capture_output=True, timeout=120)
