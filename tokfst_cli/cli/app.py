"""The ``tokfst`` command line: thin typer modules over the library core."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import traceback
from typing import Optional

import typer
from typer._click.exceptions import ClickException, UsageError  # typer 0.29 vendors click (pinned in pyproject.toml)

from tokfst_cli.cli import helptext
from tokfst_cli.cli.bench import bench_cmd
from tokfst_cli.cli.cache import cache_cmd
from tokfst_cli.cli.canonical_check import canonical_check_cmd
from tokfst_cli.cli.common import STATE
from tokfst_cli.cli.compile_batch import compile_batch_cmd
from tokfst_cli.cli.compile_bpe import compile_bpe_cmd
from tokfst_cli.cli.compile_maxmatch import compile_maxmatch_cmd
from tokfst_cli.cli.count import count_cmd
from tokfst_cli.cli.doctor import doctor_cmd
from tokfst_cli.cli.draw import draw_cmd
from tokfst_cli.cli.encode import encode_cmd
from tokfst_cli.cli.errors import LATE, MEMORY_LIMIT, TIME_LIMIT, exit_codes_line, word
from tokfst_cli.cli.inspect import inspect_cmd
from tokfst_cli.cli.output import OUT
from tokfst_cli.cli.promote import promote_cmd
from tokfst_cli.cli.sample import sample_cmd
from tokfst_cli.errors import TokfstError
from tokfst_cli.support import guard, progress
from tokfst_cli.support.cache import cache_dir
from tokfst_cli.support.guard import format_size
from tokfst_cli.support.meta import __version__, signal_line

app = typer.Typer(
    name="tokfst",
    help="Compile and inspect tokenizer automata: promote regexes to token automata "
         "(OpenFst files or JSON indexes), build canonical BPE/MaxMatch filters, draw and "
         "benchmark them. Data goes to stdout, diagnostics to stderr.\n\n" + exit_codes_line(),
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        OUT.text(f"tokfst {__version__}")
        raise typer.Exit(0)


def _size(value: Optional[str]) -> Optional[str]:
    if value is not None:
        try:
            guard.parse_size(value)
        except ValueError:
            raise typer.BadParameter(f"{value!r} is not a size; e.g. 4G, 500M, 75% or 0 (no limit)") from None
    return value


@app.callback()
def root(
    debug: bool = typer.Option(False, "--debug", help="Show Python tracebacks on errors."),
    timeout: Optional[float] = typer.Option(None, "--timeout", metavar="SECONDS", min=0,
                                            help=helptext.TIMEOUT_OPTION),
    max_memory: Optional[str] = typer.Option(None, "--max-memory", metavar="SIZE", callback=_size,
                                             help=helptext.MAX_MEMORY_OPTION),
    quiet: bool = typer.Option(False, "--quiet", help="No progress line on stderr (also TOKFST_QUIET=1)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Global options (--timeout and --max-memory are kept by the supervisor, see main)."""
    STATE["debug"] = debug
    OUT.set_quiet(quiet)


COMMANDS = [  # (name, function, short help, long help), in the order of `tokfst --help`
    ("compile-bpe", compile_bpe_cmd, "Compile the canonical BPE automaton A_BPE (implicit or .fst).",
     helptext.COMPILE_BPE),
    ("compile-maxmatch", compile_maxmatch_cmd, "Compile the MaxMatch transducer T_Aho of a WordPiece tokenizer.",
     helptext.COMPILE_MAXMATCH),
    ("promote", promote_cmd, "Promote a regex to a token automaton (.fst or JSON index).", helptext.PROMOTE),
    ("compile-batch", compile_batch_cmd, "Compile many regexes, schemas and grammars (local pool, Ray, Dask).",
     helptext.COMPILE_BATCH),
    ("canonical-check", canonical_check_cmd, "Check token sequences for canonicity (exit 0/1/2 as grep).",
     helptext.CANONICAL_CHECK),
    ("draw", draw_cmd, "Draw an automaton as dot, svg, pdf or png.", helptext.DRAW),
    ("sample", sample_cmd, "Draw random token sequences of an artifact (ids, tokens or text).", helptext.SAMPLE),
    ("bench", bench_cmd, "Reproduce the paper's tables and time tokfst against its peers.", helptext.BENCH),
    ("doctor", doctor_cmd, "Print versions, tools and the cache's state for bug reports.", helptext.DOCTOR),
    ("cache", cache_cmd, "List or clear the cache of built automata (tokfst cache list|clear).", helptext.CACHE),
    ("count", count_cmd, "Count an artifact's token sequences and strings by length, exactly.", helptext.COUNT),
    ("inspect", inspect_cmd, "Structure, coalescence and skip rates of token automata.", helptext.INSPECT),
    ("encode", encode_cmd, "Encode text to token ids as Hugging Face's encode does (whole or streamed).",
     helptext.ENCODE),
]
for _name, _fn, _short, _long in COMMANDS:
    app.command(_name, short_help=_short, help=_long)(_fn)


def main(supervise: bool | None = None) -> None:
    """Entry point: one-line errors on stderr, the exit codes of ``EXIT_CODES``, tracebacks only with --debug.

    Run as the program (the ``tokfst`` console script or ``python -m tokfst_cli``), the command
    runs in a child process under ``--timeout`` and ``--max-memory`` (:mod:`tokfst_cli.support.guard`);
    called from Python (the tests' in-process runner) it runs here, unguarded, unless
    ``supervise`` says otherwise. TOKFST_NO_GUARD=1 runs in process when no limit is given.
    The program's entry point (``tokfst_cli/__main__.py``) has handled signals since before
    this module was imported; here the guard, or in process :func:`guard.raise_on_signals`,
    takes over.
    """
    argv = sys.argv[1:]
    program = _is_program()
    limits = _guard_limits(argv) if (program if supervise is None else supervise) else None
    if limits is None:
        if program:  # in process: signals stop the command by an exception, which cleans up
            guard.raise_on_signals()
        code = _run()
        _over(program)
        sys.exit(code)
    timeout, max_memory = limits
    STATE["max_memory"] = max_memory
    outcome = guard.run(_run, timeout, max_memory, temp_dirs=_temp_dirs(argv))
    _over(program)
    stage = outcome.stage or f"tokfst {_command(argv)}"
    size = f" at size {outcome.size}" if outcome.size is not None else ""
    given = _given(argv, "--timeout") or f"{timeout or 0:g}"  # as typed: --timeout 0.6 is 0.6 s
    if outcome.reason == "time":
        OUT.say("tokfst: error: " + TIME_LIMIT.format(stage=stage, size=size, timeout=given))
    elif outcome.reason == "late":  # the output was in place before the limit: the run is finished
        OUT.say("tokfst: " + LATE.format(timeout=given, grace=guard.GRACE))
    elif outcome.reason == "memory":
        peak = f" (peak {format_size(outcome.peak_rss)} resident)" if outcome.peak_rss else ""
        OUT.say("tokfst: error: " + MEMORY_LIMIT.format(stage=stage, limit=format_size(max_memory), size=peak))
    elif outcome.reason == "signal":
        OUT.say(signal_line(outcome.signum))
    elif outcome.reason == "crash":
        OUT.say(f"tokfst: internal error: the process died of {signal.Signals(outcome.signum).name} in {stage} "
                "(rerun with --debug)")
    sys.exit(outcome.code)


def _over(program: bool) -> None:
    """The command is over and its exit code known: the program ignores signals from here on
    (else a late one would stop it with 130 after the work was done, or, once Python's
    finalization has restored the default actions, kill it without a word)."""
    if program:
        for s in guard.FORWARDED:
            signal.signal(s, signal.SIG_IGN)


def _is_program() -> bool:
    """Is this process the tokfst program itself (not Python code calling main())?"""
    main_module = sys.modules.get("__main__")
    spec = getattr(main_module, "__spec__", None)
    if spec is not None and spec.name in ("tokfst_cli", "tokfst_cli.__main__"):
        return True
    path = getattr(main_module, "__file__", None) or ""
    return os.path.basename(path).removesuffix(".exe") == "tokfst"


GLOBAL_LIMITS = ("--timeout", "--max-memory")


def _global_options(argv: list[str]) -> tuple[dict[str, str], str] | None:
    """The limit options given before the command, and the command; None when click should
    have the word (help, version, completion, an unknown or incomplete option, no command)."""
    group = typer.main.get_command(app)
    flags, valued = set(), set()
    for p in group.params:
        if getattr(p, "is_eager", False):
            continue  # --help, --version, completion: click answers them in process
        names = [*p.opts, *getattr(p, "secondary_opts", [])]
        (flags if getattr(p, "is_flag", False) or getattr(p, "count", False) else valued).update(names)
    values: dict[str, str] = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith("-") or tok == "-":
            return values, tok
        name, eq, value = tok.partition("=")
        if name in valued:
            if not eq:
                if i + 1 >= len(argv):
                    return None
                i, value = i + 1, argv[i + 1]
            values[name] = value
        elif tok not in flags:
            return None
        i += 1
    return None


def _given(argv: list[str], name: str) -> str | None:
    """The text given to the global option ``name``, as typed (stripped)."""
    found = _global_options(argv)
    value = found[0].get(name) if found else None
    return value.strip() if value is not None else None


def _command(argv: list[str]) -> str:
    found = _global_options(argv)
    return found[1] if found and found[1] else "command"


def _guard_limits(argv: list[str]) -> tuple[float | None, int | None] | None:
    """(timeout, max_memory) for the guard, or None to run in process."""
    if any(k.startswith("_TOKFST_COMPLETE") for k in os.environ):
        return None
    found = _global_options(argv)
    if found is None:
        return None
    values = {k: v for k, v in found[0].items() if k in GLOBAL_LIMITS}
    if os.environ.get("TOKFST_NO_GUARD") == "1" and not values:
        return None
    try:
        timeout = float(values["--timeout"]) if "--timeout" in values else None
        if timeout is not None and not (timeout >= 0 and timeout != float("inf")):
            return None
        max_memory = guard.parse_size(values["--max-memory"]) if "--max-memory" in values \
            else guard.default_max_memory()
    except ValueError:
        return None  # click words the usage error
    return (timeout or None), max_memory


def _temp_dirs(argv: list[str]) -> list[str]:
    """Where a killed command may have left temporary files: beside any path of the command
    line (outputs are written beside their target) and in the cache."""
    dirs = []
    for tok in argv:
        value = tok.partition("=")[2] if tok.startswith("--") else tok
        if value and value != "-" and "\0" not in value and len(value) < 4096:
            d = os.path.dirname(os.path.abspath(value))
            if os.path.isdir(d):
                dirs.append(d)
    with contextlib.suppress(Exception):
        dirs.append(str(cache_dir()))
    return dirs


def _run() -> int:
    """The command, its errors worded: the exit code. Standard output is flushed here: a write
    that fails only then (a full disk under ``>``) is the command's one-line error, not lost."""
    code = _invoke()
    try:
        OUT.flush()
    except TokfstError as e:
        OUT.say(f"tokfst: error: {word(e)}")
        return code or e.exit_code
    except BrokenPipeError:
        sys.stderr.close()
        return code or 1
    return code


def _invoke() -> int:
    """The command, its errors worded: the exit code."""
    try:
        rc = typer.main.get_command(app).main(prog_name="tokfst", standalone_mode=False)
        return rc if isinstance(rc, int) else 0
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        OUT.say(signal_line(signal.SIGINT))
        return 128 + signal.SIGINT
    except UsageError as e:  # one line, as every other error: the problem, then where the usage is
        where = e.ctx.command_path if e.ctx is not None else "tokfst"
        msg = " ".join(e.format_message().split()).rstrip(".")  # one line, whatever click wrapped
        if type(e).__name__ == "NoArgsIsHelpError":  # bare `tokfst` (or a group without its command)
            names = ", ".join(name for name, *_ in COMMANDS) if where == "tokfst" else "see below"
            msg = f"no command given (usage: {where} [OPTIONS] COMMAND [ARGS]...; commands: {names})"
        OUT.say(f"tokfst: error: {msg}" + (" See" if msg.endswith("?") else "; see") + f" '{where} -h'")
        return e.exit_code
    except ClickException as e:
        e.show()
        return e.exit_code
    except TokfstError as e:
        if STATE["debug"]:
            traceback.print_exc()
        OUT.say(f"tokfst: error: {word(e)}")
        return e.exit_code
    except BrokenPipeError:
        sys.stderr.close()
        return 1
    except (KeyboardInterrupt, guard.Interrupted) as e:
        signum = getattr(e, "signum", signal.SIGINT)
        OUT.say(signal_line(signum))
        return 128 + signum
    except MemoryError:
        return _out_of_memory()
    except Exception as e:  # a bug: say so in one line unless --debug
        if isinstance(e, ImportError) and NO_MAP.search(str(e)):  # a library's code not mapped under the cap
            return _out_of_memory()
        if STATE["debug"]:
            traceback.print_exc()
        OUT.say(f"tokfst: internal error: {type(e).__name__}: {e} (rerun with --debug for a traceback)")
        return 1


NO_MAP = re.compile(r"failed to map segment|cannot allocate memory", re.IGNORECASE)


def _out_of_memory() -> int:
    """The memory limit (or the machine's memory) reached: one line naming the stage, exit 3."""
    if STATE["debug"]:
        traceback.print_exc()
    limit = STATE.get("max_memory")
    stage = progress.current() or guard.last_stage()[0] or f"tokfst {_command(sys.argv[1:])}"
    if limit:
        OUT.say("tokfst: error: " + MEMORY_LIMIT.format(stage=stage, limit=format_size(limit), size=""))
    else:
        OUT.say(f"tokfst: error: memory limit: {stage} ran out of memory; simplify the input")
    return 3
