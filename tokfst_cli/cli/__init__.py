"""The ``tokfst`` command line: thin typer modules over the library core."""

from __future__ import annotations

import sys
import traceback

import typer
from typer._click.exceptions import ClickException  # typer 0.29 vendors click (pinned in pyproject.toml)

from .. import __version__
from ..errors import TokfstError
from . import helptext
from .bench import bench_cmd
from .common import STATE
from .errors import word
from .canonical_check import canonical_check_cmd
from .compile_bpe import compile_bpe_cmd
from .compile_maxmatch import compile_maxmatch_cmd
from .draw import draw_cmd
from .output import OUT
from .promote import promote_cmd

app = typer.Typer(
    name="tokfst",
    help="Compile and inspect tokenizer automata: promote regexes to token automata "
         "(OpenFst files or JSON indexes), build canonical BPE/MaxMatch filters, draw and "
         "benchmark them. Data goes to stdout, diagnostics to stderr.\n\n"
         "Exit codes: 0 ok; 1 runtime error (a --max-states limit, an empty result); "
         "2 bad input or usage (unreadable or unsupported tokenizer, bad regex, bad option).",
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


@app.callback()
def root(
    debug: bool = typer.Option(False, "--debug", help="Show Python tracebacks on errors."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Global options."""
    STATE["debug"] = debug


COMMANDS = [  # (name, function, short help, long help), in the order of `tokfst --help`
    ("compile-bpe", compile_bpe_cmd, "Compile the canonical BPE automaton A_BPE (implicit or .fst).",
     helptext.COMPILE_BPE),
    ("compile-maxmatch", compile_maxmatch_cmd, "Compile the MaxMatch transducer T_Aho of a WordPiece tokenizer.",
     helptext.COMPILE_MAXMATCH),
    ("promote", promote_cmd, "Promote a regex to a token automaton (.fst or JSON index).", helptext.PROMOTE),
    ("canonical-check", canonical_check_cmd, "Check token sequences for canonicity (exit 0/1/2 as grep).",
     helptext.CANONICAL_CHECK),
    ("draw", draw_cmd, "Draw an automaton as dot, svg, pdf or png.", helptext.DRAW),
    ("bench", bench_cmd, "Reproduce the paper's tables and time tokfst against its peers.", helptext.BENCH),
]
for _name, _fn, _short, _long in COMMANDS:
    app.command(_name, short_help=_short, help=_long)(_fn)


def main() -> None:
    """Entry point: one-line errors on stderr, exit codes 0/1/2, tracebacks only with --debug."""
    command = typer.main.get_command(app)
    try:
        rc = command.main(prog_name="tokfst", standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        OUT.say("tokfst: interrupted")
        sys.exit(130)
    except ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except TokfstError as e:
        if STATE["debug"]:
            traceback.print_exc()
        OUT.say(f"tokfst: error: {word(e)}")
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(1)
    except KeyboardInterrupt:
        OUT.say("tokfst: interrupted")
        sys.exit(130)
    except Exception as e:  # a bug: say so in one line unless --debug
        if STATE["debug"]:
            traceback.print_exc()
        OUT.say(f"tokfst: internal error: {type(e).__name__}: {e} (rerun with --debug for a traceback)")
        sys.exit(1)
