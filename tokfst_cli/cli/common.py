"""Shared command-line plumbing: common arguments and options, reading patterns and lines."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import typer

from tokfst_cli.automata.fst_io import FST_MAGIC
from tokfst_cli.errors import InputError

STATE = {"debug": False}

MAX_STATES_HELP = "Stop with an error instead of building an automaton with more states than this."
MaxStates = typer.Option(1_000_000, "--max-states", min=1, metavar="N", help=MAX_STATES_HELP)
Tokenizer = typer.Argument(..., metavar="TOKENIZER", help="A tokenizer.json, a model directory holding one, a hub "
                                                             "name in the local Hugging Face cache (org/name), or a "
                                                             "bundled name (gpt2).")
Out = typer.Argument(None, metavar="OUT", help="Output file; absent or '-' = stdout.")


class Level(str, Enum):
    pipeline = "pipeline"
    model = "model"


LEVEL_HELP = ("BPE, canonical: pipeline (default): what encode(text, add_special_tokens=False) produces "
              "(normalizer, pre-tokenizer, BPE per pre-token); model: what the BPE model alone produces for the "
              "text as one pre-token (no normalizer or pre-tokenizer).")
LevelOpt = typer.Option(Level.pipeline, "--level", help=LEVEL_HELP)


_AUTOMATON_HEADS = (FST_MAGIC.to_bytes(4, "little"), b"TOKFST")  # OpenFst's magic number; tokfst's artifacts


def out_not_an_automaton(out: str | None) -> None:
    """With -e/-f/--vocab the one positional is OUT. A command whose output is never an automaton
    (a drawing, a report) refuses an OUT that names an existing OpenFst file or tokfst artifact:
    whoever wrote it meant IN, and writing would destroy it."""
    if out in (None, "-") or not Path(out).is_file():
        return
    try:
        with open(out, "rb") as f:
            head = f.read(4096)
    except OSError:
        return
    if head.startswith(_AUTOMATON_HEADS) or (head.lstrip().startswith(b"{") and b'"tokfst-' in head):
        raise InputError(f"{out} is an automaton, and with -e, -f or --vocab the one path is OUT, which would "
                         "overwrite it", "give a new OUT path, or drop -e/-f/--vocab to read it as IN")


def read_pattern(regex: str | None, regex_file: str | None) -> str:
    """The pattern from -e, or from -f FILE ('-' = stdin; one trailing newline dropped)."""
    if (regex is None) == (regex_file is None):
        raise InputError("give exactly one of -e REGEX or -f REGEX_FILE", "see 'tokfst promote --help'")
    if regex is not None:
        return regex
    text = read_text(regex_file, "regex file")
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    if not text:
        raise InputError(f"regex file {regex_file} is empty", "put one pattern in the file")
    return text


def read_text(src: str | None, what: str = "") -> str:
    """UTF-8 text from a file, or stdin for None or '-' (its bytes read as UTF-8 whatever the
    locale's encoding: text that is not UTF-8 is refused, never passed on as surrogates)."""
    stdin = src in (None, "-")
    name = ("stdin" if stdin else src) if not what else f"{what} from stdin" if stdin else f"{what} {src}"
    try:
        if stdin:
            raw = getattr(sys.stdin, "buffer", None)
            return sys.stdin.read() if raw is None else raw.read().decode("utf-8")
        with open(src, encoding="utf-8", newline="") as f:  # the text as it is: no '\r' made a '\n'
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read {name}: {getattr(e, 'strerror', None) or e}",
                         "give a readable UTF-8 file") from None


def read_binary(src: str, fix: str) -> bytes:
    """Bytes from a file, or stdin for '-'."""
    try:
        return sys.stdin.buffer.read() if src == "-" else Path(src).read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {src}: {e.strerror or e}", fix) from None
