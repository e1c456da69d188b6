"""The ``tokfst`` command line: thin typer modules over the library core."""

from __future__ import annotations

import sys
import traceback

import typer
from typer._click.exceptions import ClickException  # typer 0.29 vendors click

from .. import __version__
from ..errors import TokfstError
from .bench import bench_cmd
from .common import STATE, say
from .canonical_check import canonical_check_cmd
from .compile_bpe import compile_bpe_cmd
from .compile_maxmatch import compile_maxmatch_cmd
from .draw import draw_cmd
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
        print(f"tokfst {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    debug: bool = typer.Option(False, "--debug", help="Show Python tracebacks on errors."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Global options."""
    STATE["debug"] = debug


ordered = ["compile-bpe", "compile-maxmatch", "promote", "canonical-check", "draw", "bench"]
for _name in ordered:
    if _name == "compile-bpe":
        app.command("compile-bpe", short_help="Compile the canonical BPE automaton A_BPE (implicit or .fst).")(
            compile_bpe_cmd)
    elif _name == "canonical-check":
        app.command("canonical-check", short_help="Check token sequences for canonicity (exit 0/1/2 as grep).")(
            canonical_check_cmd)
    elif _name == "promote":
        app.command("promote", short_help="Promote a regex to a token automaton (.fst or JSON index).")(promote_cmd)
    elif _name == "draw":
        app.command("draw", short_help="Draw an automaton as dot, svg, pdf or png.")(draw_cmd)
    elif _name == "compile-maxmatch":
        app.command("compile-maxmatch", short_help="Compile the MaxMatch transducer T_Aho of a WordPiece tokenizer.")(
            compile_maxmatch_cmd)
    else:
        app.command("bench", short_help="Reproduce the paper's tables and time tokfst against its peers.")(bench_cmd)


def main() -> None:
    """Entry point: one-line errors on stderr, exit codes 0/1/2, tracebacks only with --debug."""
    command = typer.main.get_command(app)
    try:
        rc = command.main(prog_name="tokfst", standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        say("tokfst: interrupted")
        sys.exit(130)
    except ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except TokfstError as e:
        if STATE["debug"]:
            traceback.print_exc()
        say(f"tokfst: error: {e.one_line()}")
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(1)
    except KeyboardInterrupt:
        say("tokfst: interrupted")
        sys.exit(130)
    except Exception as e:  # a bug: say so in one line unless --debug
        if STATE["debug"]:
            traceback.print_exc()
        say(f"tokfst: internal error: {type(e).__name__}: {e} (rerun with --debug for a traceback)")
        sys.exit(1)
